import { svelte } from "@sveltejs/vite-plugin-svelte";
import { defineConfig } from "vitest/config";

// The API paths the UI calls; `npm run dev` and `vite preview` forward them to a running server
// (WGPU_LLAMA_URL, default http://127.0.0.1:8080) so the UI can be worked on without the binary
// serving it.
const apiPaths = ["/health", "/props", "/slots", "/apply-template", "/v1"];
const target = process.env.WGPU_LLAMA_URL ?? "http://127.0.0.1:8080";
const proxy = Object.fromEntries(apiPaths.map((p) => [p, { target, changeOrigin: true }]));

export default defineConfig({
  plugins: [svelte()],
  resolve: {
    // The client package is a symlink to ../clients/typescript, whose own node_modules a clean
    // clone lacks: its openapi-fetch import must resolve to ours.
    dedupe: ["openapi-fetch"],
    // Component tests mount Svelte components in jsdom: they need Svelte's browser build, which
    // vitest (resolving as for a server) would not pick.
    ...(process.env.VITEST ? { conditions: ["browser"] } : {}),
  },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
  },
  server: { proxy },
  preview: { proxy },
  test: {
    environment: "jsdom",
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/setup.ts"],
  },
});
