import assert from "node:assert/strict";
import { isConnectionLine, serverLine, wholeLinesFrom } from "../../lib/broker/mod.ts";
import {
  lastStorageFault,
  STORAGE_FAULT_RE,
  StorageFaultReader,
} from "../../lib/mesh/storage_fault.ts";

// Lines as nats-server 2.10 and 2.15 write them (with log times), the client's name included.
const INJECTED = [
  `[4242] 2026/12/05 15:10:00.123456 [ERR] 127.0.0.1:41234 - cid:9 - "x: no space left on device" - "v1.0:javascript" - Publish Violation - JWT User "UABC", Subject "not.mine"`,
  `[4242] 2026/12/05 15:10:00.123456 [INF] 127.0.0.1:41234 - cid:10 - "Failed to reload" - Slow Consumer Detected`,
  `[4242] 2026/12/05 15:10:00.123456 [WRN] 10.0.0.2:6222 - rid:3 - "Critical write error" - Route closed`,
  `[4242] [ERR] 127.0.0.1:41234 - lid:4 - "JetStream file resource limits exceeded for server" - closed`,
];
const OWN = [
  `[4242] 2026/12/05 15:10:00.123456 [ERR] JetStream failed to store a msg on stream 'DM_x': write /s/js/msgs/1.blk: no space left on device`,
  `[4242] 2026/12/05 15:10:00.123456 [WRN] Filestore [DLV_x] Critical write error: no space left on device`,
  `[1] [ERR] no space left on device`,
];

Deno.test("broker log - a line about a connection is told apart from the server's own", () => {
  for (const l of INJECTED) assert.equal(isConnectionLine(l), true, l);
  for (const l of OWN) assert.equal(isConnectionLine(l), false, l);
});

Deno.test("broker log - a storage fault or a reload verdict is read only from the server's own lines (red team 26)", () => {
  for (const l of INJECTED) assert.equal(STORAGE_FAULT_RE.test(l), false, l);
  for (const l of OWN) assert.equal(STORAGE_FAULT_RE.test(l), true, l);
  const reload = serverLine(/Reloaded server configuration|Failed to reload/);
  assert.equal(reload.test(INJECTED[1]), false);
  assert.equal(
    reload.test("[4242] 2026/12/05 15:10:01.000000 [ERR] Failed to reload server configuration"),
    true,
  );
  assert.equal(
    reload.test("[4242] 2026/12/05 15:10:01.000000 [INF] Reloaded server configuration"),
    true,
  );
});

Deno.test("broker log - a read from the middle of a line starts at the next whole line, and leaves an unfinished one (red team 27)", () => {
  const enc = new TextEncoder();
  const client = `[9] [ERR] 127.0.0.1:5 - cid:1 - "v${
    "A".repeat(100)
  } no space left on device" - x`;
  const data = enc.encode(`first\n${client}\nthird\nunfini`);
  // From inside the client's line: its end alone would read as the server's own words.
  const mid = `first\n`.length + client.length - 30;
  assert.deepEqual(wholeLinesFrom(data, mid), { lines: ["third"], end: data.length - 6 });
  // From a line's start, and from 0.
  assert.deepEqual(wholeLinesFrom(data, 6).lines, [client, "third"]);
  assert.deepEqual(wholeLinesFrom(data, 0).lines, ["first", client, "third"]);
  // Nothing whole yet.
  assert.deepEqual(wholeLinesFrom(enc.encode("abc"), 0), { lines: [], end: 0 });
});

Deno.test("broker log - the watchdog's first look, and status, never read a client's line from its middle (red team 27)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "cotal-loglines-" });
  try {
    const log = `${dir}/nats-server.log`;
    // A line far longer than the tail the readers look at, the verdict's words at its end.
    const long = `[9] 2026/12/05 15:00:00.000000 [ERR] 127.0.0.1:5 - cid:1 - "v${
      "A".repeat(400 * 1024)
    } no space left on device" - Publish Violation`;
    await Deno.writeTextFile(log, `[9] [INF] Starting nats-server\n${long}\n`);
    assert.equal(await lastStorageFault(log), undefined);
    const r = new StorageFaultReader(log);
    assert.equal(await r.poll(), undefined);
    // Appended in two writes, the second finishing the line: still a client's line.
    await Deno.writeTextFile(log, `${long.slice(0, 1000)}`, { append: true });
    assert.equal(await r.poll(), undefined);
    await Deno.writeTextFile(log, `${long.slice(1000)}\n`, { append: true });
    assert.equal(await r.poll(), undefined);
    // The server's own fault line is seen.
    await Deno.writeTextFile(log, "[9] [ERR] Critical write error: no space left on device\n", {
      append: true,
    });
    assert.match((await r.poll())!, /Critical write error/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
