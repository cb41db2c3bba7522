import { spaceKeyHex } from "./keys.ts";

/** The store key of the broker's trust record (operator + system account, no system seed). */
export const BROKER_AUTH_KEY = "auth/broker.json";

/** The store key of one space's data-account record: `auth/account.<hex>.json`. */
export function spaceAccountKey(space: string): string {
  return `auth/account.${spaceKeyHex(space)}.json`;
}

/**
 * The legacy single-bundle key: a container may mount a stripped signer bundle here (the data
 * account's public key and signing seed only, `stripSpaceAuth`) instead of the split records.
 */
export const SIGNER_BUNDLE_KEY = "auth/auth.json";

/** True for keys that hold signing authority: everything under `auth/`. */
export function isSignerKey(key: string): boolean {
  return key.startsWith("auth/");
}
