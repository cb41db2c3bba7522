/**
 * A real operator-mode broker for one space, configured by lib/trust's serverConfig, plus a
 * minter for any profile. Not a test file (leading underscore).
 */
import {
  createSpaceAuth,
  mintCreds,
  type MintOpts,
  newIdentity,
  type Profile,
  serverConfig,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import { startTestBroker, type TestBroker, uniqueSpace } from "../_harness/broker.ts";

export interface SpaceBroker {
  space: string;
  auth: SpaceAuth;
  broker: TestBroker;
  url: string;
  mint(profile: Profile, opts?: MintOpts): Promise<string>;
  [Symbol.asyncDispose](): Promise<void>;
}

export async function startSpaceBroker(
  opts: { extraConfig?: string } = {},
): Promise<SpaceBroker> {
  const space = uniqueSpace("wire");
  const auth = await createSpaceAuth(space);
  const broker = await startTestBroker({
    config: ({ port, storeDir }) =>
      serverConfig(auth, [auth], { storeDir, port }) + (opts.extraConfig ?? ""),
  });
  return {
    space,
    auth,
    broker,
    url: broker.url,
    mint: (profile, o) => mintCreds(auth, newIdentity(), profile, o),
    [Symbol.asyncDispose]: () => broker.stop(),
  };
}
