/**
 * Red team 23: host kernel memory pinned in unread unix-socket buffers.
 *
 * Attack: red team 2 pinned 4.6 GiB of host memory in unread NETLINK_USERSOCK messages, charged
 * to no cgroup; netlink is now refused by seccomp. Unix sockets cannot be refused (every
 * program uses them), so a program agent makes socketpairs and writes each full without ever
 * reading (perl, 8 processes x 2,000 pairs, SO_SNDBUF raised): if those skbs were charged to no
 * cgroup, the agent would pin ~3 GiB of host memory past its memory limit.
 *
 * Observed (2026-12-05, kernel 6.18, cgroup v1): the skbs are charged to the agent's memory
 * cgroup (GFP_KERNEL_ACCOUNT): the agent is OOM-killed inside its group (exit 137, "Memory cgroup
 * out of memory ... oom_memcg=/.../cotal-pin-..."), restarted 3 times and retired; the host's
 * MemAvailable never dropped by more than its limit. HELD.
 *
 * Passes when the defence holds: host MemAvailable drops by at most the agent's limit + slack.
 */
import assert from "node:assert/strict";
import { agentDir, cotal, memAvailableKiB } from "./_rt23_stack.ts";

const ROOT = "/tmp/rt23root-up";
const WORK = "/tmp/rt23w-up/u";
const LIMIT_MIB = 1024;

Deno.test({
  name:
    "redteam23 - unread unix socket buffers are charged to the agent's memory limit (skipped: held when written; too heavy for the suite: eight processes pin 2,000 unread socket pairs each until the agent's memory group kills it)",
  ignore: true,
}, async () => {
  await agentDir(WORK, ["unixpin.pl"]);
  console.log(await cotal(["up", "--root", ROOT, "--port", "46220", "--detach"], 170_000));
  try {
    const base = await memAvailableKiB();
    const spawned = await cotal([
      "spawn",
      "--root",
      ROOT,
      "--agent",
      "program",
      "--name",
      "pin",
      "--workdir",
      WORK,
      "--limit",
      `memory=${LIMIT_MIB}M`,
      "--restarts",
      "1",
      "--",
      "/usr/bin/perl",
      `${WORK}/unixpin.pl`,
      "8",
      "2000",
      `${WORK}/out`,
    ]);
    console.log(spawned);
    assert.match(spawned, /spawned pin/);
    let worst = 0;
    const end = Date.now() + 40_000;
    while (Date.now() < end) {
      worst = Math.max(worst, base - await memAvailableKiB());
      await new Promise((r) => setTimeout(r, 250));
    }
    const ps = await cotal(["ps", "--root", ROOT], 30_000);
    console.log(`host MemAvailable dropped by at most ${Math.round(worst / 1024)} MiB; ps:\n${ps}`);
    console.log(
      "attacker wrote:",
      await Deno.readTextFile(`${WORK}/out`).catch(() => "(nothing: killed first)"),
    );
    assert.ok(
      worst < (LIMIT_MIB + 1024) * 1024,
      `the agent pinned ${
        Math.round(worst / 1024)
      } MiB of host memory past its ${LIMIT_MIB} MiB limit`,
    );
  } finally {
    console.log(await cotal(["down", "--root", ROOT], 120_000));
  }
});
