/**
 * `cotalAuthProvider`: the built-in `auth-provider:cotal` extension. Importing this module
 * registers it (the one top-level side effect the house allows). A session loads the space's
 * provisioned auth material and exposes the bearer issuer, the actor ledger and the IdP bridge.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import {
  type AuthProvider,
  type AuthProviderContext,
  type AuthProviderSession,
  registry,
} from "../registry.ts";
import { FsSecretStore } from "../workspace/mod.ts";
import { createIdpBridge, type IdpBridge } from "./idp_bridge.ts";
import { type IdpPin, loadIdpPin } from "./idp_pin.ts";
import type { UserTokenIssuer } from "./issuer.ts";
import { type ActorLedger, createActorLedger } from "./ledger.ts";
import { loadIssuer, loadOwnerSecret } from "./secrets.ts";

/** The session `cotalAuthProvider.create` returns: the seam plus the space's auth pieces. */
export interface CotalAuthSession extends AuthProviderSession {
  /** The space the session serves. */
  readonly space: string;
  /** The pinned IdP. */
  readonly pin: IdpPin;
  /** Issues Cotal bearers. */
  readonly issuer: UserTokenIssuer;
  /** The actors and their grants. */
  readonly ledger: ActorLedger;
  /** Exchanges IdP tokens for bearers. */
  readonly bridge: IdpBridge;
}

/**
 * The Cotal auth provider. Secrets (issuer keys, owner secret) come from the context's
 * SecretStore; the non-secret state (IdP pin, actor ledger) from its state dir. Nothing is
 * provisioned here: absent material is refused with the code of what is missing.
 */
export const cotalAuthProvider: AuthProvider = Object.freeze({
  kind: "auth-provider" as const,
  name: "cotal",
  async create(context: AuthProviderContext): Promise<CotalAuthSession> {
    const { space, store, stateDir } = context;
    const state = new FsSecretStore(stateDir);
    const pin = await loadIdpPin(state, space);
    const issuer = await loadIssuer(store, space);
    const ownerSecret = await loadOwnerSecret(store, space);
    const ledger = createActorLedger({ space, store: state });
    const bridge = createIdpBridge({ ...pin, space, ownerSecret, ledger, tokenIssuer: issuer });
    ownerSecret.fill(0);
    return {
      space,
      pin,
      issuer,
      ledger,
      bridge,
      userCredentials() {
        // A connect rides the callout's sentinel creds, which the auth-callout responder
        // provisions; until it exists there is nothing honest to hand out.
        return Promise.reject(
          new CotalError(
            "auth_callout_missing",
            `Space ${JSON.stringify(space)} has no auth callout yet, so user credentials ` +
              "cannot be issued; exchange an IdP token with session.bridge for a bearer instead.",
          ),
        );
      },
      close() {
        return Promise.resolve();
      },
    };
  },
});

registry.register([cotalAuthProvider]);
