/**
 * JetStream API failures as Cotal errors: "not found" told apart, a broker refusal named by the
 * operation it refused.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { errorText } from "./connect.ts";

/** True when a JetStream error means "no such stream/consumer/key". */
export function isNotFound(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; api_error?: { err_code?: number } };
  const code = e?.api_error?.err_code;
  if (code === 10059 || code === 10014 || code === 10037) return true;
  return typeof e?.message === "string" && /not found/i.test(e.message) && e.code === "404";
}

/** Run a JetStream API call, turning broker refusals into a CotalError naming the operation. */
export async function jsmCall<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw wrapJs(what, err);
  }
}

/** Wrap a JetStream failure; a permission refusal gets its own code. */
export function wrapJs(what: string, err: unknown): CotalError {
  const text = errorText(err);
  if (/permission/i.test(text) || (err as { code?: string })?.code === "PERMISSIONS_VIOLATION") {
    return new CotalError(
      "permission_denied",
      `The broker refused to ${what} (${text}); use a credential whose profile grants it.`,
      { cause: err },
    );
  }
  return new CotalError(
    "jetstream_failed",
    `Could not ${what} (${text}); check the broker has JetStream enabled and retry.`,
    { cause: err },
  );
}
