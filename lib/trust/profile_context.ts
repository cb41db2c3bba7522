/**
 * The inputs a profile's grants are computed from, and the ordered, de-duplicated set they
 * are collected into.
 *
 * @module
 */
import type { SpaceNames } from "./grant_names.ts";
import type { Permissions, Principal } from "./types.ts";

/** Validated inputs of one grant computation. */
export interface GrantContext {
  names: SpaceNames;
  /** The reply-inbox token: the cred may subscribe `_INBOX_<connId>.>` only. */
  connId: string;
  principal: Principal;
  lifecycleUid?: string;
  allowSubscribe: readonly string[];
  allowPublish: readonly string[];
  role?: string;
  deprovisionTarget?: { owner: string; actor: string; lifecycleUid: string };
  /**
   * The signer rail's token (lib/trust/sign_rail_token.ts): the supervisor's and the signer's
   * rail grants name it; without it they get none.
   */
  signRailToken?: string;
}

/** Collects allow and deny subjects in first-seen order, each once. */
export class GrantSet {
  #pubAllow = new Set<string>();
  #pubDeny = new Set<string>();
  #subAllow = new Set<string>();
  #subDeny = new Set<string>();

  /** Allows publishing to each subject. */
  pub(...subjects: string[]): void {
    for (const s of subjects) this.#pubAllow.add(s);
  }
  /** Denies publishing to each subject (deny wins over allow at the broker). */
  denyPub(...subjects: string[]): void {
    for (const s of subjects) this.#pubDeny.add(s);
  }
  /** Allows subscribing to each subject. */
  sub(...subjects: string[]): void {
    for (const s of subjects) this.#subAllow.add(s);
  }
  /** Denies subscribing to each subject. */
  denySub(...subjects: string[]): void {
    for (const s of subjects) this.#subDeny.add(s);
  }
  /** The collected lists as a permission block. */
  toPermissions(): Permissions {
    return {
      pub: { allow: [...this.#pubAllow], deny: [...this.#pubDeny] },
      sub: { allow: [...this.#subAllow], deny: [...this.#subDeny] },
    };
  }
}
