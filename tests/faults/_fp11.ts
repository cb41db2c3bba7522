/**
 * Fault pass 11 helpers: `startDeliverySpace` (tests/delivery/_helpers.ts) with a broker it can
 * kill and start again on the same port. Not a test file.
 */
import { freePort, startTestBroker, tempDir, uniqueSpace } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  mintCreds,
  type MintOpts,
  newIdentity,
  type Profile,
  serverConfig,
} from "../../lib/trust/mod.ts";
import { workspaceSecretStore } from "../../lib/workspace/mod.ts";
import { newLifecycleUid, provisionAgent, setupSpaceStreams } from "../../lib/wire/mod.ts";
import { type DeliverySpace, fillStore } from "../delivery/_helpers.ts";

/** A free loopback port (the pass ran in its own range; the suite takes any free one). */
export function rangePort(): number {
  return freePort();
}

export async function startRangeSpace(prefix: string): Promise<DeliverySpace> {
  const space = uniqueSpace(prefix);
  const auth = await createSpaceAuth(space);
  const render = ({ port, storeDir }: { port: number; storeDir: string }) =>
    serverConfig(auth, [auth], { port, storeDir });
  let broker = await startTestBroker({ config: render, port: rangePort() });
  const { port, storeDir } = broker;
  let keptStore: string | undefined;
  const url = broker.url;
  const mint = (profile: Profile, o?: MintOpts) => mintCreds(auth, newIdentity(), profile, o);
  await setupSpaceStreams({ servers: url, space, creds: await mint("provisioner") });
  const root = await tempDir("cotal-fp11-root-");
  const store = workspaceSecretStore(root);
  const deliveryCreds = await fillStore(store, auth, {});
  return {
    space,
    auth,
    get broker() {
      return broker;
    },
    async killBroker() {
      keptStore = storeDir;
      Deno.kill(broker.process.pid, "SIGKILL");
      await broker.process.exited;
    },
    async startBroker() {
      broker = await startTestBroker({ config: render, port, storeDir });
    },
    url,
    root,
    store,
    deliveryCreds,
    mint,
    async agent(name, o = {}) {
      const principal = { owner: "local", actor: name };
      const uid = newLifecycleUid();
      const allowSubscribe = o.allowSubscribe ?? ["general"];
      const p = await provisionAgent({
        servers: url,
        creds: await mint("provisioner"),
        space,
        auth,
        identity: newIdentity(),
        principal,
        lifecycleUid: uid,
        subscribe: [],
        allowSubscribe,
        allowPublish: o.allowPublish ?? allowSubscribe.filter((c) => !/[*>]/.test(c)),
        ...(o.role ? { role: o.role } : {}),
      });
      return { name, principal, id: `local.${name}`, uid, creds: p.creds };
    },
    async [Symbol.asyncDispose]() {
      await broker.stop();
      if (keptStore) await Deno.remove(keptStore, { recursive: true }).catch(() => {});
    },
  };
}
