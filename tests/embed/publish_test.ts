/**
 * The library as a package others import: `deno publish --dry-run` passes (a license, no slow
 * types in the public API) and the package holds the library, its entry points and docs, never
 * the tests, benches, CI or tool cache.
 */
import assert from "node:assert/strict";

const CHECKOUT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

Deno.test("embed - deno publish --dry-run passes and would publish no test, bench or cache file", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["publish", "--dry-run", "--allow-dirty"],
    cwd: CHECKOUT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, text.slice(-2000));
  assert.match(text, /Dry run complete/);
  const files = [...text.matchAll(/file:\/\/(\S+)/g)].map((m) => m[1].slice(CHECKOUT.length + 1));
  assert.ok(files.includes("mod.ts") && files.includes("LICENSE"), files.join("\n"));
  assert.ok(files.some((f) => f.startsWith("lib/")));
  for (const f of files) {
    assert.ok(!/^(tests|\.cache|\.ci|docs|examples)\//.test(f), `${f} would be published`);
  }
});
