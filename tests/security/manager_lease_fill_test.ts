/**
 * The supervisors' lease bucket (`cotal_manager_<s>`, 1 MiB) against answers a member with its
 * own cred aims at made-up lease keys (`$JS.API.INFO` with the reply `$KV.<bucket>.lease.<n>`;
 * the broker checks no reply subject): red team 20b named it after filling the delivery lease
 * bucket that way. Full, it refused the next supervisor's lease, so the space's supervisor
 * could not start. The bucket stores `lease.*` and `renewal` only, and a supervisor that finds
 * it full purges the rows no manager wrote, then takes its lease.
 */
import assert from "node:assert/strict";
import { mintCreds, newIdentity, newLifecycleUid } from "../../lib/trust/mod.ts";
import { bucketNames, kvStreamName } from "../../lib/wire/mod.ts";
import { connectAs } from "../delivery/_helpers.ts";
import { startManagerMesh } from "../manager/_manager_mesh.ts";

Deno.test("manager lease - a bucket filled with aimed answers at made-up lease keys does not keep the supervisor from starting", async () => {
  await using mesh = await startManagerMesh("mgrfill");
  const creds = await mintCreds(mesh.auth, newIdentity(), "agent", {
    principal: { owner: "local", actor: "mallory" },
    lifecycleUid: newLifecycleUid(),
  });
  const mallory = await connectAs(mesh.url, creds);
  const bucket = bucketNames(mesh.space).manager;
  try {
    for (let i = 0; i < 4000; i++) {
      mallory.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.lease.j${i}` });
      if (i % 500 === 499) await mallory.flush();
    }
    await mallory.flush();
    // Keys outside the bucket's set are not stored at all.
    mallory.publish("$JS.API.INFO", new Uint8Array(), { reply: `$KV.${bucket}.elsewhere` });
    await mallory.flush();
    await new Promise((r) => setTimeout(r, 1000));
    const prov = await connectAs(
      mesh.url,
      await mintCreds(mesh.auth, newIdentity(), "provisioner"),
    );
    const jsm = await prov.jetstreamManager();
    const before = (await jsm.streams.info(kvStreamName(bucket))).state;
    assert.ok(before.bytes > 900 * 1024, `the bucket holds ${before.bytes} bytes`);
    const manager = await mesh.manager();
    assert.ok(manager, "the supervisor started");
    const after = await jsm.streams.info(kvStreamName(bucket), {
      subjects_filter: `$KV.${bucket}.>`,
    });
    const keys = Object.keys(after.state.subjects ?? {});
    assert.ok(!keys.includes(`$KV.${bucket}.elsewhere`));
    assert.ok(keys.every((k) => !k.startsWith(`$KV.${bucket}.lease.j`)), keys.join(" "));
    await prov.close();
  } finally {
    await mallory.close();
  }
});
