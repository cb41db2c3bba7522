/**
 * The delivery daemon as its systemd unit runs it: the release binary's permission row, its
 * creds loaded by systemd into a credentials directory under /run/credentials
 * (`LoadCredential=`, `--creds-dir $CREDENTIALS_DIRECTORY`), the store hidden. It reads its own
 * cred there and the membership feed's, so the membership view comes up (before, the unit
 * passed `--creds` alone: the release row could not even read that file, and with no store the
 * feed and evictions were down).
 */
import assert from "node:assert/strict";
import { releaseLayout } from "../../lib/permissions.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { startDeliverySpace, startExecutable } from "./_helpers.ts";

const isRoot = Deno.uid() === 0;
const skip = isRoot ? "" : " (skipped: /run/credentials is root's)";

const ALL = [
  "delivery.creds",
  "membership-rw.creds",
  "membership-observer.creds",
  "connection-evictor.creds",
];

async function credsDir(
  s: Awaited<ReturnType<typeof startDeliverySpace>>,
  kinds: string[],
): Promise<string> {
  // What systemd makes for a unit: /run/credentials/<unit>/, one file per LoadCredential=.
  const dir = `/run/credentials/cotal-test-${crypto.randomUUID().slice(0, 8)}.service`;
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  for (const k of kinds) {
    const text = await s.store.get(`space.${spaceKeyHex(s.space)}/${k}`);
    assert.ok(text, `the test store holds ${k}`);
    await Deno.writeTextFile(`${dir}/${k}`, text, { mode: 0o400 });
  }
  return dir;
}

function releaseRow(url: string) {
  // The release row, as `deno task compile` bakes it, with the test broker's port.
  return releaseLayout("/var/lib/cotal", [`127.0.0.1:${new URL(url).port}`]);
}

Deno.test({
  name:
    `delivery - under its release row with its creds in a systemd credentials dir, the daemon serves and its membership feed is up${skip}`,
  ignore: !isRoot,
  async fn() {
    await using s = await startDeliverySpace({ prefix: "credsdir" });
    const dir = await credsDir(s, ALL);
    const d = startExecutable("cotal-delivery", releaseRow(s.url), [
      "--space",
      s.space,
      "--server",
      s.url,
      "--creds-dir",
      dir,
    ]);
    try {
      await d.waitForLine(/delivery daemon up/, 30_000);
      await d.waitForLine(/membership feed up/, 30_000);
      assert.doesNotMatch(d.stderr(), /membership feed down/);
    } catch (e) {
      console.error(d.stderr().slice(-2000));
      throw e;
    } finally {
      d.kill();
      await d.exited;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    `delivery - a credentials dir without the $SYS creds: the daemon serves, and says the membership feed is down and why${skip}`,
  ignore: !isRoot,
  async fn() {
    await using s = await startDeliverySpace({ prefix: "credsdirnosys" });
    const dir = await credsDir(s, ["delivery.creds", "membership-rw.creds"]);
    const d = startExecutable("cotal-delivery", releaseRow(s.url), [
      "--space",
      s.space,
      "--server",
      s.url,
      "--creds-dir",
      dir,
    ]);
    try {
      await d.waitForLine(/delivery daemon up/, 30_000);
      const line = await d.waitForLine(/membership feed down.*/, 30_000);
      assert.match(line, /membership-observer/);
    } finally {
      d.kill();
      await d.exited;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("delivery - --creds-dir with --root is refused: one cred source, named", async () => {
  await using s = await startDeliverySpace({ prefix: "credsdirboth" });
  const d = startExecutable("cotal-delivery", releaseRow(s.url), [
    "--space",
    s.space,
    "--server",
    s.url,
    "--creds-dir",
    "/nonexistent",
    "--root",
    s.root,
  ]);
  const st = await d.exited;
  assert.notEqual(st.code, 0);
  assert.match(d.stderr(), /--creds-dir is the daemon's only cred source/);
});
