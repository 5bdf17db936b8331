// Prints the gzipped size of what a first visit loads (index.html and the JS and CSS it links)
// and fails the build above the budget; code loaded later by import() does not count.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const BUDGET = 400 * 1024;
const dist = new URL("../dist/", import.meta.url).pathname;
const html = readFileSync(join(dist, "index.html"), "utf8");
const linked = [...html.matchAll(/(?:src|href)="\/(assets\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]);
const files = ["index.html", ...new Set(linked)];
let total = 0;
for (const f of files) {
  const size = gzipSync(readFileSync(join(dist, f)), { level: 9 }).length;
  total += size;
  console.log(`  ${f}: ${(size / 1024).toFixed(1)} KB gzipped`);
}
console.log(`first-load size: ${(total / 1024).toFixed(1)} KB gzipped (budget ${BUDGET / 1024} KB)`);
if (total > BUDGET) {
  console.error("first-load size exceeds the budget");
  process.exit(1);
}
