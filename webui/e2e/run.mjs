// `npm run e2e`: the browser tests, one file at a time (each starts its own server).
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";

const dir = new URL(".", import.meta.url).pathname;
const files = readdirSync(dir).filter((f) => f.endsWith(".test.mjs")).sort().map((f) => dir + f);
const r = spawnSync(process.execPath, ["--test", "--test-concurrency=1", ...files], { stdio: "inherit" });
process.exit(r.status ?? 1);
