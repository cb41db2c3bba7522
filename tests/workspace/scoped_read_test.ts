import assert from "node:assert/strict";
import { FsSecretStore } from "../../lib/workspace/fs_secret_store.ts";

async function childGet(root: string, allow: string, key: string): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--no-prompt",
      `--allow-read=${allow}`,
      new URL("./_scoped_get_child.ts", import.meta.url).pathname,
      root,
      key,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("workspace - a reader granted only its key's directory can read that key and nothing else", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cotal-scoped-" });
  try {
    const store = new FsSecretStore(`${dir}/secrets`);
    await store.put("space.ab/delivery.creds", "mine");
    await store.put("auth/broker.json", "signer");
    const allow = `${dir}/secrets/space.ab`;
    assert.equal(await childGet(`${dir}/secrets`, allow, "space.ab/delivery.creds"), "value:mine");
    assert.equal(
      await childGet(`${dir}/secrets`, allow, "space.ab/absent.creds"),
      "value:undefined",
    );
    // Outside the grant the read is refused, never reported as absent.
    assert.equal(await childGet(`${dir}/secrets`, allow, "auth/broker.json"), "error:store_io");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
