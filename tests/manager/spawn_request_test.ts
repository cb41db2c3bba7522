import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { allocateName } from "../../lib/manager/spawn_plan.ts";
import {
  isReservedAgentName,
  parseSpawnRequest,
  RESERVED_AGENT_NAMES,
} from "../../lib/manager/spawn_request.ts";

const base = { agent: "program", command: "/bin/cat" };

Deno.test("spawn request - the mesh's own names are reserved, exactly and as a prefix", () => {
  for (const name of [...RESERVED_AGENT_NAMES, "Operator", "manager_0123abcd", "delivery_x"]) {
    assert.throws(
      () => parseSpawnRequest({ ...base, name }),
      (e) => isCotalError(e, "name_reserved") && e.message.includes(JSON.stringify(name)),
      name,
    );
  }
  for (const name of ["operators", "my_manager", "deliveryboy", "worker"]) {
    assert.equal(isReservedAgentName(name), false, name);
    assert.equal(parseSpawnRequest({ ...base, name }).name, name);
  }
  // A role may be a reserved word; the name made from it is not.
  assert.equal(
    allocateName({ role: "operator", agent: "task-runner" }, () => false),
    "agent_operator_1",
  );
});

Deno.test("spawn request - grants stay named: no wildcard that reaches every channel", () => {
  for (
    const [key, channel] of [
      ["allowSubscribe", ">"],
      ["allowSubscribe", "*"],
      ["subscribe", "*.x"],
      ["allowSubscribe", "*.*"],
    ]
  ) {
    assert.throws(
      () => parseSpawnRequest({ ...base, [key]: [channel] }),
      (e) => isCotalError(e, "spawn_bad_args") && /every channel of the space/.test(e.message),
      `${key} ${channel}`,
    );
  }
  const ok = parseSpawnRequest({
    ...base,
    allowSubscribe: ["team.>", "general"],
    subscribe: ["general"],
  });
  assert.deepEqual(ok.allowSubscribe, ["team.>", "general"]);
  assert.throws(
    () => parseSpawnRequest({ ...base, allowPublish: ["team.>"] }),
    (e) => isCotalError(e, "spawn_bad_args"),
  );
});

Deno.test("spawn request - sandbox fields are checked: paths, network, limits", () => {
  for (
    const [args, why] of [
      [{ workdir: "rel/dir" }, /workdir must be an absolute path/],
      [{ prompt: "review\u0007this" }, /prompt must be text of at most 16384 characters/],
      [{ prompt: "x".repeat(16_385) }, /prompt must be text of at most 16384 characters/],
      [{ model: "claude sonnet" }, /model must be a model name/],
      [{ workdir: "/srv/../etc" }, /without '\.\.'/],
      [{ expose: ["/ok", "relative"] }, /expose must be an absolute path/],
      [{ expose: new Array(17).fill("/x") }, /at most 16/],
      [{ net: "bridge" }, /net must be "relay"/],
      [{ limits: { memory: "100G" } }, /The memory limit must be/],
      [{ limits: { forks: 1 } }, /Unknown limit "forks"/],
    ] as const
  ) {
    assert.throws(
      () => parseSpawnRequest({ ...base, ...args }),
      (e) => isCotalError(e, "spawn_bad_args") && why.test(e.message),
      JSON.stringify(args),
    );
  }
  const r = parseSpawnRequest({
    ...base,
    workdir: "/srv/p",
    expose: ["/opt/tool"],
    net: "host",
    limits: { memory: "2G" },
  });
  assert.deepEqual([r.workdir, r.expose, r.net, r.limits], ["/srv/p", ["/opt/tool"], "host", {
    memory: 2 * 1024 ** 3,
  }]);
  assert.equal(parseSpawnRequest(base).net, "relay");
});

Deno.test("spawn request - env: names of capitals, nothing the sandbox sets or that changes how programs load, bounded", () => {
  const ok = parseSpawnRequest({ ...base, env: { ANTHROPIC_API_KEY: "sk-1", GEMINI_API_KEY: "" } });
  assert.deepEqual(ok.env, { ANTHROPIC_API_KEY: "sk-1", GEMINI_API_KEY: "" });
  assert.equal(parseSpawnRequest({ ...base, env: {} }).env, undefined);
  for (
    const [env, why] of [
      [{ PATH: "/tmp" }, /PATH is set by the sandbox or changes how programs load/],
      [{ LD_PRELOAD: "/x.so" }, /LD_PRELOAD is set by the sandbox/],
      [{ DENO_V8_FLAGS: "--x" }, /DENO_V8_FLAGS is set by the sandbox/],
      [{ COTAL_LAUNCH: "/x" }, /COTAL_LAUNCH is set by the sandbox/],
      [{ NODE_OPTIONS: "--require x" }, /NODE_OPTIONS is set by the sandbox/],
      [{ HOME: "/" }, /HOME is set by the sandbox/],
      [{ "lower": "x" }, /"lower" is not a name of capitals/],
      [{ "A B": "x" }, /is not a name of capitals/],
      [{ KEY: 1 }, /KEY must be text without NUL/],
      [{ KEY: "a\0b" }, /KEY must be text without NUL/],
      [{ KEY: "x".repeat(16_385) }, /KEY is longer than 16384 bytes/],
      [
        Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`K${i}`, "v"])),
        /at most 16 variables/,
      ],
      [["KEY"], /env must be an object/],
      [
        Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`K${i}`, "v".repeat(15_000)])),
        /env holds more than 65536 bytes in all/,
      ],
    ] as const
  ) {
    assert.throws(
      () => parseSpawnRequest({ ...base, env }),
      (e) => isCotalError(e, "spawn_bad_args") && why.test((e as Error).message),
      JSON.stringify(env).slice(0, 60),
    );
  }
});
