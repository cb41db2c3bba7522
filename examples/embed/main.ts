/**
 * An embedder's program, outside Cotal's own project: it imports the library as
 * `@cotal/deno` through this directory's import map (the library's dependencies listed beside
 * it, as README.md's "Embedding" says) and composes one space from the specification's snippets, on
 * a store of its own that has only get, put and delete:
 *
 * 1. trust: a broker operator and one space account, its signer records and daemon creds put
 *    into the store (`provisionSpaceStore`);
 * 2. the broker: `serverConfig` rendered and `nats-server` started on a free loopback port;
 * 3. the space: streams and its default delivery class, with a `provisioner` cred;
 * 4. the delivery daemon (`runDelivery`) and a `Manager`, both on the same store;
 * 5. two endpoints: alice DMs bob while bob is offline, bob comes online and gets it.
 *
 * Usage: `deno run -A main.ts <nats-server binary>`. Prints `embed example: ok` and exits 0, or
 * the error and exits 1; it stops everything it started on either path.
 *
 * @module
 */
import {
  composeSpaceAuth,
  CotalEndpoint,
  createBrokerAuth,
  createSpaceAccountAuth,
  ensureDefaultDeliveryClass,
  Manager,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  provisionAgent,
  provisionSpaceStore,
  runDelivery,
  type SecretStore,
  serverConfig,
  setupSpaceStreams,
} from "@cotal/deno";

/** The specification's store: get, put and delete, nothing more. */
class MapStore implements SecretStore {
  readonly #m = new Map<string, string>();
  get(key: string): Promise<string | undefined> {
    return Promise.resolve(this.#m.get(key));
  }
  put(key: string, value: string): Promise<void> {
    this.#m.set(key, value);
    return Promise.resolve();
  }
  delete(key: string): Promise<void> {
    this.#m.delete(key);
    return Promise.resolve();
  }
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function waitForPort(port: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`nats-server did not listen within ${ms} ms`);
      await new Promise((r) => setTimeout(r, 100));
      void err;
    }
  }
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) =>
    timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms)
  );
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const natsServer = Deno.args[0] ?? "nats-server";
const space = "embed";
const stops: (() => Promise<unknown>)[] = [];
const dir = await Deno.makeTempDir({ prefix: "cotal-embed-example-" });
try {
  // 1. Trust, and everything the daemons read, in the embedder's own store.
  const broker = await createBrokerAuth("embedder");
  const account = await createSpaceAccountAuth(broker, space);
  const auth = composeSpaceAuth(broker, account);
  const store = new MapStore();
  await provisionSpaceStore(store, broker, account);

  // 2. The broker, from the library's own config.
  const port = freePort();
  await Deno.writeTextFile(
    `${dir}/nats.conf`,
    serverConfig(broker, [auth], { port, storeDir: `${dir}/js`, host: "127.0.0.1" }),
  );
  const nats = new Deno.Command(natsServer, {
    args: ["-c", `${dir}/nats.conf`],
    stdout: "null",
    stderr: "null",
  }).spawn();
  stops.push(async () => {
    nats.kill("SIGTERM");
    await nats.status;
  });
  await waitForPort(port, 10_000);
  const url = `nats://127.0.0.1:${port}`;

  // 3. The space on the broker.
  const provisioner = await mintCreds(auth, newIdentity(), "provisioner");
  await setupSpaceStreams({ servers: url, space, creds: provisioner });
  await ensureDefaultDeliveryClass({
    servers: url,
    space,
    creds: provisioner,
    deliveryClass: "durable",
  });

  // 4. The delivery daemon and a Manager, on the same store.
  const delivery = await runDelivery(
    { values: { space, server: url }, positionals: [], raw: [] },
    store,
    { log: { info: () => {}, warn: () => {}, error: (l) => console.error(l) } },
  );
  stops.push(() => delivery.stop());
  const manager = new Manager({
    space,
    servers: url,
    workspaceRoot: `${dir}/root`,
    secretStore: store,
    log: () => {},
  });
  await within(manager.start(), 30_000, "the Manager's start");
  stops.push(() => manager.stop());
  if (manager.status().space !== space) throw new Error("the Manager serves another space");

  // 5. A DM to an agent that is offline, delivered when it comes online.
  const agent = async (actor: string) => {
    const lifecycleUid = newLifecycleUid();
    const p = await provisionAgent({
      servers: url,
      creds: provisioner,
      space,
      auth,
      identity: newIdentity(),
      principal: { owner: "local", actor },
      lifecycleUid,
    });
    return new CotalEndpoint({
      servers: url,
      space,
      card: { name: actor },
      creds: p.creds,
      lifecycleUid,
    });
  };
  const alice = await agent("alice");
  const bob = await agent("bob");
  await alice.start();
  stops.push(() => alice.stop());
  await alice.unicast("local.bob", "hello while you were away");
  const got = new Promise<string>((resolve) =>
    bob.addEventListener("message", (ev) => {
      const part = ev.message.parts[0];
      if (part?.kind === "text") resolve((part as { text: string }).text);
    })
  );
  await bob.start();
  stops.push(() => bob.stop());
  const text = await within(got, 20_000, "bob's DM");
  if (text !== "hello while you were away") throw new Error(`bob got ${JSON.stringify(text)}`);
  console.log("embed example: ok");
} catch (err) {
  console.error(`embed example: ${(err as Error).stack ?? err}`);
  Deno.exitCode = 1;
} finally {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await Deno.remove(dir, { recursive: true }).catch(() => {});
}
