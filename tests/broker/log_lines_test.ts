import assert from "node:assert/strict";
import { isConnectionLine, serverLine } from "../../lib/broker/mod.ts";
import { STORAGE_FAULT_RE } from "../../lib/mesh/storage_fault.ts";

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
