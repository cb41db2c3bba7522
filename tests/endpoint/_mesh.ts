/**
 * A real operator-mode mesh for endpoint tests: a broker from our own serverConfig, the
 * space's streams and buckets from setupSpaceStreams, and agents provisioned with
 * provisionAgent (durables, ACL row, minted agent creds).
 */
import { startTestBroker, type TestBroker, uniqueSpace } from "../_harness/broker.ts";
import { CotalEndpoint, type EndpointOptions } from "../../lib/endpoint/mod.ts";
import {
  createSpaceAuth,
  type Identity,
  mintCreds,
  newIdentity,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { newLifecycleUid, type Principal } from "../../lib/wire/names.ts";
import { type AgentChannelPolicy, provisionAgent } from "../../lib/wire/provision.ts";
import { setupSpaceStreams } from "../../lib/wire/streams.ts";
import { STANDING_MIN_TTL_SEC } from "../../lib/trust/lifetimes.ts";
import { resignedFor } from "../_harness/short_creds.ts";

/** One provisioned agent. */
export interface TestAgent {
  principal: Principal;
  id: string;
  lifecycleUid: string;
  identity: Identity;
  policy: AgentChannelPolicy;
  /** The creds minted at provisioning. */
  creds: string;
  /** Mint fresh creds for the same identity and grants. */
  mint(expiresInSeconds?: number): Promise<string>;
  /** An endpoint for this agent (creds default to the provisioned ones). */
  endpoint(opts?: Partial<EndpointOptions>): CotalEndpoint;
}

/** A running operator-mode mesh with one space. */
export interface TestMesh {
  space: string;
  auth: SpaceAuth;
  broker: TestBroker;
  url: string;
  /** A fresh provisioner credential. */
  provisioner(): Promise<string>;
  agent(actor: string, policy?: AgentChannelPolicy & { ttlSec?: number }): Promise<TestAgent>;
  /** Stop the broker and start it again on the same port and store. */
  restart(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Start a broker in operator mode and set up one space on it. */
export async function startMesh(prefix = "ep"): Promise<TestMesh> {
  const space = uniqueSpace(prefix);
  const auth = await createSpaceAuth(space);
  const render = (c: { port: number; storeDir: string }) =>
    serverConfig(auth, [auth], { storeDir: c.storeDir, port: c.port });
  let broker = await startTestBroker({ config: render });
  const provisioner = () => mintCreds(auth, newIdentity(), "provisioner");
  await setupSpaceStreams({ servers: broker.url, creds: await provisioner(), space });
  const endpoints: CotalEndpoint[] = [];
  // A restart keeps the store, so the first broker's dir must outlive it.
  let keptStore: string | undefined;
  const mesh: TestMesh = {
    space,
    auth,
    get broker() {
      return broker;
    },
    get url() {
      return broker.url;
    },
    provisioner,
    async agent(actor, policy = {}) {
      const principal = { owner: "local", actor };
      const identity = newIdentity();
      const lifecycleUid = newLifecycleUid();
      const { ttlSec, ...channelPolicy } = policy;
      const p = await provisionAgent({
        servers: broker.url,
        creds: await provisioner(),
        space,
        auth,
        identity,
        principal,
        lifecycleUid,
        ...channelPolicy,
        ...(ttlSec ? { expiresInSeconds: ttlSec } : {}),
      });
      const mint = async (expiresInSeconds?: number) => {
        const short = expiresInSeconds !== undefined && expiresInSeconds < STANDING_MIN_TTL_SEC;
        const creds = await mintCreds(auth, identity, "agent", {
          principal,
          lifecycleUid,
          allowSubscribe: p.allowSubscribe,
          allowPublish: p.allowPublish,
          ...(p.role ? { role: p.role } : {}),
          ...(expiresInSeconds && !short ? { expiresInSeconds } : {}),
        });
        return short ? await resignedFor(auth, creds, expiresInSeconds!) : creds;
      };
      return {
        principal,
        id: `local.${actor}`,
        lifecycleUid,
        identity,
        policy: channelPolicy,
        creds: p.creds,
        mint,
        endpoint(opts = {}) {
          const ep = new CotalEndpoint({
            servers: broker.url,
            space,
            card: { name: actor, ...(p.role ? { role: p.role } : {}) },
            lifecycleUid,
            creds: p.creds,
            channels: p.subscribe,
            ...opts,
          });
          endpoints.push(ep);
          return ep;
        },
      };
    },
    async restart() {
      const { port, storeDir } = broker;
      keptStore = storeDir;
      await broker.process.stop();
      broker = await startTestBroker({ config: render, port, storeDir });
    },
    async [Symbol.asyncDispose]() {
      await Promise.all(endpoints.map((e) => e.stop().catch(() => {})));
      await broker.stop();
      if (keptStore) await Deno.remove(keptStore, { recursive: true }).catch(() => {});
    },
  };
  return mesh;
}

/** Collects events of one type from an endpoint. */
export function collect<T extends Event>(ep: EventTarget, type: string): T[] {
  const out: T[] = [];
  ep.addEventListener(type, (ev) => void out.push(ev as T));
  return out;
}
