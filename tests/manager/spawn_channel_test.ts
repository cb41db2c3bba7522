/**
 * The spawn channel as a hostile agent meets it: a real unix socket, what is written on it
 * parsed strictly and bounded (one line of at most 4 KiB within 5 s, one request at a time, two
 * connections), and the supervisor's policy on what an agent may spawn (delegated_spawn.ts):
 * only the personas its request lists, its own children, within a count and a rate.
 */
import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import {
  askSpawnChannel,
  SPAWN_LINE_MAX,
  SPAWN_MAX_CONNECTIONS,
  SpawnChannel,
  type SpawnChannelRequest,
} from "../../lib/manager/sandbox/spawn_channel.ts";
import {
  CHILD_SPAWN_RATE,
  delegatedSpawnHandler,
  SpawnRate,
} from "../../lib/manager/delegated_spawn.ts";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { parseSpawnRequest } from "../../lib/manager/spawn_request.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

/** Writes raw bytes, reads what comes back until the supervisor ends the connection. */
async function raw(path: string, bytes: Uint8Array, opts: { end?: boolean } = {}) {
  const conn = await Deno.connect({ transport: "unix", path });
  try {
    // A connection past the bound is closed before anything is written.
    if (bytes.length) await conn.write(bytes).catch(() => {});
    if (opts.end) await conn.closeWrite();
    let text = "";
    const dec = new TextDecoder();
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = await conn.read(buf).catch(() => null);
      if (n === null) break;
      text += dec.decode(buf.subarray(0, n));
    }
    return text;
  } finally {
    try {
      conn.close();
    } catch {
      // Closed by the supervisor.
    }
  }
}

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("spawn channel - each malformed request is refused with a sentence and never reaches the supervisor", async () => {
  const dir = await tempDir("cotal-spawnch-");
  const seen: SpawnChannelRequest[] = [];
  const ch = await SpawnChannel.listen(`${dir}/0.spawn`, (req) => {
    seen.push(req);
    return Promise.resolve({ echoed: req.op });
  });
  try {
    assert.equal((await Deno.stat(ch.path)).mode! & 0o777, 0o600);
    const cases: [string, RegExp][] = [
      ["not json\n", /not JSON/],
      ['["spawn"]\n', /must be a JSON object/],
      ['{"v":2,"op":"list"}\n', /v must be 1/],
      ['{"v":1,"op":"exec"}\n', /op must be spawn, despawn or list/],
      [
        '{"v":1,"op":"spawn","persona":"a","command":"/bin/sh"}\n',
        /"command" is not a field of spawn/,
      ],
      ['{"v":1,"op":"spawn","persona":"../x"}\n', /spawn needs persona: a name/],
      ['{"v":1,"op":"despawn","name":{"$ne":1}}\n', /despawn needs name/],
      ['{"v":1,"op":"__proto__"}\n', /op must be/],
    ];
    for (const [line, why] of cases) {
      const reply = JSON.parse(await raw(ch.path, enc(line)));
      assert.equal(reply.ok, false, line);
      assert.equal(reply.code, "spawn_request_invalid", line);
      assert.match(reply.message, why, line);
    }
    // A line past the bound, with no newline: refused without waiting for more.
    const long = JSON.parse(await raw(ch.path, new Uint8Array(SPAWN_LINE_MAX + 100).fill(0x61)));
    assert.match(long.message, new RegExp(`longer than ${SPAWN_LINE_MAX} bytes`));
    // A request that never ends its line: the supervisor stops waiting at its deadline.
    const silent = JSON.parse(await raw(ch.path, enc('{"v":1,"op":"li')));
    assert.match(silent.message, /did not end with a newline within 5 s/);
    // Half a line, then the agent hangs up.
    assert.match(await raw(ch.path, enc('{"v":1'), { end: true }), /did not end with a newline/);
    assert.deepEqual(seen, []);
    // A well-formed one is served.
    assert.deepEqual(await askSpawnChannel(ch.path, { op: "list" }, 5_000), { echoed: "list" });
    assert.deepEqual(seen, [{ op: "list" }]);
  } finally {
    await ch.close();
    await removeTempDir(dir);
  }
});

Deno.test("spawn channel - one request at a time, a bounded number of connections, and the socket gone on close", async () => {
  const dir = await tempDir("cotal-spawnch-");
  const release = Promise.withResolvers<void>();
  let calls = 0;
  const ch = await SpawnChannel.listen(`${dir}/0.spawn`, async () => {
    calls++;
    await release.promise;
    return { done: true };
  });
  try {
    const first = askSpawnChannel(ch.path, { op: "spawn", persona: "helper" }, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    // While it is served, another request is refused at once.
    const busy = await askSpawnChannel(ch.path, { op: "list" }, 10_000).catch((e) => e);
    assert.ok(isCotalError(busy, "spawn_busy"), String(busy));
    // Connections past the bound are closed unanswered.
    const held: Deno.Conn[] = [];
    for (let i = 0; i < SPAWN_MAX_CONNECTIONS; i++) {
      held.push(await Deno.connect({ transport: "unix", path: ch.path }));
      await new Promise((r) => setTimeout(r, 150));
    }
    assert.equal(await raw(ch.path, enc('{"v":1,"op":"list"}\n')), "");
    for (const c of held) c.close();
    release.resolve();
    assert.deepEqual(await first, { done: true });
    assert.equal(calls, 1);
  } finally {
    await ch.close();
  }
  const gone = await askSpawnChannel(ch.path, { op: "list" }, 2_000).catch((e) => e);
  assert.ok(isCotalError(gone, "spawn_unreachable"), String(gone));
  await removeTempDir(dir);
});

function row(name: string): AgentRow {
  return {
    name,
    id: `local.${name}`,
    lifecycleUid: "u",
    agent: "task-runner",
    status: "running",
    restarts: 0,
    uptimeMs: 0,
    isolation: "bwrap",
    present: true,
  };
}

Deno.test("spawn policy - only listed personas, only its own children, within the count and the rate", async () => {
  let t = 1_000_000;
  const agents = new Map<string, { parent?: string }>();
  const spawned: Record<string, unknown>[] = [];
  let n = 0;
  let kept = 0;
  const PARENT = { name: "lead", lifecycleUid: "0123456789abcdef0123456789abcdef" };
  const mine = () => [...agents].filter(([, a]) => a.parent === PARENT.lifecycleUid);
  const rate = new SpawnRate(() => t);
  let online = false;
  const handler = delegatedSpawnHandler(
    PARENT,
    { helper: { agent: "task-runner", command: "/bin/cat", role: "helpers" } },
    2,
    {
      spawn: (args) => {
        spawned.push(args);
        const name = `helpers_${++n}`;
        agents.set(name, { parent: String(args.spawnedBy) });
        return Promise.resolve(row(name));
      },
      despawn: (name) => Promise.resolve(agents.delete(name)),
      children: () => mine().map(([k]) => row(k)),
      count: () => mine().length + kept,
      ready: () => online,
      rate,
      log: () => {},
    },
  );
  agents.set("other", {});
  const refused = (code: CotalErrorCode) => (e: unknown) => isCotalError(e, code);
  // Before its own spawn is complete it may not ask (red team 17: a parent that asked, then
  // killed its runner before it was online, left the children it asked for behind).
  await assert.rejects(handler({ op: "spawn", persona: "helper" }), refused("spawn_not_ready"));
  assert.deepEqual(spawned, []);
  online = true;
  await assert.rejects(handler({ op: "spawn", persona: "admin" }), refused("spawn_not_granted"));
  await assert.rejects(handler({ op: "spawn", persona: "toString" }), refused("spawn_not_granted"));
  const a = await handler({ op: "spawn", persona: "helper" });
  assert.equal(a.name, "helpers_1");
  // The request is the operator's template, marked with this agent's lifecycle; nothing else.
  assert.deepEqual(spawned[0], {
    agent: "task-runner",
    command: "/bin/cat",
    role: "helpers",
    spawnedBy: PARENT.lifecycleUid,
  });
  // Children kept to come back count too (red team 16: a parent asking before they were back).
  kept = 1;
  await assert.rejects(
    handler({ op: "spawn", persona: "helper" }),
    refused("spawn_children_exhausted"),
  );
  kept = 0;
  await handler({ op: "spawn", persona: "helper" });
  await assert.rejects(
    handler({ op: "spawn", persona: "helper" }),
    refused("spawn_children_exhausted"),
  );
  await assert.rejects(handler({ op: "despawn", name: "other" }), refused("spawn_not_child"));
  assert.ok(agents.has("other"));
  assert.deepEqual(await handler({ op: "despawn", name: "helpers_1" }), { name: "helpers_1" });
  assert.deepEqual(
    ((await handler({ op: "list" })).children as { name: string }[]).map((c) => c.name),
    ["helpers_2"],
  );
  // Spawn/despawn in a loop is held to the rate: the burst, then one per refill interval.
  for (let i = 2; i < CHILD_SPAWN_RATE.burst; i++) {
    await handler({ op: "spawn", persona: "helper" });
    await handler({ op: "despawn", name: `helpers_${n}` });
  }
  await assert.rejects(
    handler({ op: "spawn", persona: "helper" }),
    (e: unknown) => refused("spawn_rate_limited")(e) && /try again in \d+ s/.test(String(e)),
  );
  // The rate is the parent's, not the handler's: one made again (a restart) has no new burst.
  const again = delegatedSpawnHandler(PARENT, { helper: { agent: "x" } }, 2, {
    spawn: () => Promise.reject(new Error("must not spawn")),
    despawn: () => Promise.resolve(),
    children: () => [],
    count: () => 0,
    ready: () => true,
    rate,
    log: () => {},
  });
  await assert.rejects(again({ op: "spawn", persona: "helper" }), refused("spawn_rate_limited"));
  t += CHILD_SPAWN_RATE.refillMs;
  await handler({ op: "spawn", persona: "helper" });
});

Deno.test("spawn request - spawnable holds complete requests that run in the default sandbox and do not spawn", () => {
  const ok = parseSpawnRequest({
    agent: "task-runner",
    command: "/bin/cat",
    spawnable: { helper: { agent: "task-runner", command: "/bin/cat", role: "helpers" } },
  });
  assert.deepEqual(Object.keys(ok.spawnable!), ["helper"]);
  const child = { agent: "task-runner", command: "/bin/cat" };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ helper: { ...child, spawnable: { x: child } } }, /spawnable\.helper may not set spawnable/],
    [{ helper: { ...child, spawnedBy: "someone" } }, /may not set spawnedBy/],
    [{ helper: { ...child, name: "operator2" } }, /may not set name/],
    [{ helper: { ...child, trusted: true } }, /must run in the default sandbox/],
    [{ helper: { ...child, net: "host" } }, /must run in the default sandbox/],
    [{ helper: { agent: "task-runner" } }, /spawnable\.helper: The task runner needs command/],
    [{ helper: { ...child, allowSubscribe: [">"] } }, /would grant every channel/],
    [{ "../x": child }, /is not a persona name/],
    [{}, /1 to 8 personas/],
    [Object.fromEntries([..."abcdefghi"].map((k) => [k, child])), /1 to 8 personas/],
  ];
  for (const [spawnable, why] of cases) {
    assert.throws(
      () => parseSpawnRequest({ ...child, spawnable }),
      (e: unknown) => isCotalError(e, "spawn_bad_args") && why.test((e as Error).message),
      JSON.stringify(spawnable),
    );
  }
  assert.throws(
    () => parseSpawnRequest({ ...child, spawnedBy: "lead" }),
    (e: unknown) =>
      isCotalError(e, "spawn_bad_args") && /spawnedBy must be the lifecycle uid/.test(String(e)),
  );
});
