/**
 * The supervisor's permission row when it signs remotely (what `cotal up` runs): it cannot read
 * or write the signer records, although its row is otherwise read-all (the pty's exception).
 * The attempt is made by a real process under the row.
 */
import assert from "node:assert/strict";
import { denoRunFlags } from "../../lib/permissions.ts";
import { tempDir } from "../_harness/broker.ts";

async function underRow(root: string, remoteSigner: boolean, code: string): Promise<string> {
  const flags = denoRunFlags("cotal-supervise", {
    root,
    broker: ["127.0.0.1:4222"],
    remoteSigner,
  });
  const script = `${await tempDir("cotal-suprow-script-")}/try.ts`;
  await Deno.writeTextFile(script, code);
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

const TRY = (path: string) => `
const out = [];
for (const [what, fn] of [
  ["read", () => Deno.readTextFile(${JSON.stringify(path)})],
  ["list", async () => { for await (const _ of Deno.readDir(${
  JSON.stringify(path.replace(/\/[^/]+$/, ""))
})) {} }],
  ["write", () => Deno.writeTextFile(${JSON.stringify(path)}, "x")],
]) {
  try { await fn(); out.push(what + ":ok"); } catch (e) { out.push(what + ":" + e.name); }
}
console.log(out.join(" "));
`;

Deno.test("signer - a remote-signing supervisor's row can neither read nor write the signer records", async () => {
  const root = await tempDir("cotal-suprow-");
  const record = `${root}/secrets/auth/broker.json`;
  await Deno.mkdir(`${root}/secrets/auth`, { recursive: true, mode: 0o700 });
  await Deno.writeTextFile(record, '{"seed":"SO-not-a-real-one"}', { mode: 0o600 });
  assert.equal(
    await underRow(root, true, TRY(record)),
    "read:NotCapable list:NotCapable write:NotCapable",
  );
  // Its other files stay readable (the store's creds, its state root).
  await Deno.writeTextFile(`${root}/secrets/other.creds`, "x", { mode: 0o600 });
  assert.equal(
    await underRow(root, true, TRY(`${root}/secrets/other.creds`)),
    "read:ok list:ok write:ok",
  );
  // The local-signing row (an embedder's supervisor) still reads them: the row is what differs.
  assert.equal(await underRow(root, false, TRY(record)), "read:ok list:ok write:ok");
});
