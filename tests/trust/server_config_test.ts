import assert from "node:assert/strict";
import { uniqueSpace } from "../_harness/broker.ts";
import {
  BROKER_LOG_FILES,
  BROKER_LOG_ROTATE_BYTES,
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  MAX_CONTROL_LINE,
  serverConfig,
} from "../../lib/trust/mod.ts";

const broker = await createBrokerAuth("cfg");
const a = await createSpaceAccountAuth(broker, "alpha");
const b = await createSpaceAccountAuth(broker, "beta");
const foreign = await createSpaceAuth("alpha");

function code(c: string) {
  return (err: unknown) => {
    assert.equal((err as { code?: string }).code, c, String(err));
    return true;
  };
}

Deno.test("trust - serverConfig preloads every account under a MEMORY resolver", () => {
  const conf = serverConfig(broker, [a, b], { storeDir: "/srv/js", port: 4333 });
  assert.match(conf, /^port: 4333$/m);
  assert.match(conf, /^host: "127\.0\.0\.1"$/m);
  assert.match(conf, /^resolver: MEMORY$/m);
  assert.match(conf, new RegExp(`^system_account: "${broker.sys.pub}"$`, "m"));
  assert.match(conf, new RegExp(`^max_control_line: ${MAX_CONTROL_LINE}$`, "m"));
  assert.ok(MAX_CONTROL_LINE >= 32768);
  assert.match(conf, /store_dir: "\/srv\/js"/);
  assert.ok(conf.includes(`operator: ${JSON.stringify(broker.operator.jwt)}`));
  for (const acct of [broker.sys, a.account, b.account]) {
    assert.ok(conf.includes(`  ${acct.pub}: ${JSON.stringify(acct.jwt)}`), acct.pub);
  }
  assert.doesNotMatch(conf, /allow_non_tls|tls \{|cluster \{/);
  // No secret ever reaches the config.
  for (
    const seed of [
      broker.operator.seed,
      broker.sys.signingSeed!,
      a.account.seed,
      a.account.signingSeed,
    ]
  ) {
    assert.ok(!conf.includes(seed));
  }
});

Deno.test("trust - serverConfig refuses a missing storeDir", () => {
  assert.throws(
    () => serverConfig(broker, [a], {} as { storeDir: string }),
    code("missing_store_dir"),
  );
  assert.throws(() => serverConfig(broker, [a], { storeDir: " " }), code("missing_store_dir"));
});

Deno.test("trust - serverConfig refuses duplicate and foreign accounts", () => {
  assert.throws(() => serverConfig(broker, [a, a], { storeDir: "/x" }), code("duplicate_account"));
  assert.throws(
    () => serverConfig(broker, [a], { storeDir: "/x", extraAccounts: [b.account, b.account] }),
    code("duplicate_account"),
  );
  assert.throws(
    () => serverConfig(broker, [a], { storeDir: "/x", extraAccounts: [broker.sys] }),
    code("duplicate_account"),
  );
  assert.throws(
    () => serverConfig(broker, [a, foreign], { storeDir: "/x" }),
    code("foreign_account"),
  );
  assert.throws(
    () => serverConfig(broker, [a], { storeDir: "/x", extraAccounts: [foreign.account] }),
    code("foreign_account"),
  );
  // A broker whose SYS does not match its operator JWT is refused too.
  assert.throws(
    () => serverConfig({ operator: broker.operator, sys: foreign.sys }, [a], { storeDir: "/x" }),
    code("invalid_operator"),
  );
  assert.throws(() => serverConfig(broker, [], { storeDir: "/x" }), code("no_spaces"));
});

Deno.test("trust - serverConfig renders TLS without a plaintext fallback", () => {
  const conf = serverConfig(broker, [a], {
    storeDir: "/x",
    tls: { certFile: "/c.pem", keyFile: "/k.pem" },
  });
  assert.ok(conf.includes('tls {\n  cert_file: "/c.pem"\n  key_file: "/k.pem"\n}'));
  assert.doesNotMatch(conf, /allow_non_tls/);
  assert.throws(
    () => serverConfig(broker, [a], { storeDir: "/x", tls: { certFile: "", keyFile: "/k" } }),
    code("invalid_tls"),
  );
  // Client TLS with plaintext routes would be mixed mode: refused.
  assert.throws(
    () =>
      serverConfig(broker, [a], {
        storeDir: "/x",
        tls: { certFile: "/c", keyFile: "/k" },
        cluster: { name: "c", serverName: "n1", listen: "127.0.0.1:6222", routes: [] },
      }),
    code("mixed_tls"),
  );
});

Deno.test("trust - serverConfig renders a cluster block with a server name", () => {
  const conf = serverConfig(broker, [a], {
    storeDir: "/x",
    cluster: {
      name: "cotal",
      serverName: "n1",
      listen: "127.0.0.1:6222",
      routes: ["nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"],
    },
  });
  assert.match(conf, /^server_name: "n1"$/m);
  assert.ok(conf.includes('cluster {\n  name: "cotal"\n  listen: "127.0.0.1:6222"\n  routes: ['));
  assert.ok(conf.includes(`    "nats-route://127.0.0.1:6224"`));
  assert.throws(
    () =>
      serverConfig(broker, [a], {
        storeDir: "/x",
        cluster: { name: "c d", serverName: "n1", listen: "127.0.0.1:1", routes: [] },
      }),
    code("invalid_cluster"),
  );
  assert.throws(
    () =>
      serverConfig(broker, [a], {
        storeDir: "/x",
        cluster: { name: "c", serverName: "n1", listen: "127.0.0.1:1", routes: ["127.0.0.1:2"] },
      }),
    code("invalid_cluster"),
  );
});

Deno.test("trust - the broker rotates its own log: an agent's refused publishes cannot fill the disk", async () => {
  const auth = await createSpaceAuth(uniqueSpace("log"));
  const text = serverConfig(auth, [auth], {
    storeDir: "/var/lib/cotal/js",
    logFile: "/var/log/n.log",
  });
  assert.match(text, /^log_file: "\/var\/log\/n\.log"$/m);
  assert.match(text, new RegExp(`^logfile_size_limit: ${BROKER_LOG_ROTATE_BYTES}$`, "m"));
  assert.match(text, new RegExp(`^logfile_max_num: ${BROKER_LOG_FILES}$`, "m"));
  assert.doesNotMatch(serverConfig(auth, [auth], { storeDir: "/s" }), /log_file/);
});
