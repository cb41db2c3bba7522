import type { CotalErrorCode } from "./error_codes/mod.ts";

/**
 * The one error type that crosses Cotal's boundaries. `code` is stable (tests and `--json`
 * match on it); `message` is one sentence for people that names what was wrong and the fix.
 */
export class CotalError extends Error {
  /** A stable code for programs (`invalid_channel`, `signer_unreachable`, ...; lib/error_codes.ts). */
  readonly code: CotalErrorCode;
  /** An error with a stable `code` and a one-sentence `message`. */
  constructor(code: CotalErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CotalError";
    this.code = code;
  }
}

/** True when `err` is a {@linkcode CotalError}, optionally with the given code. */
export function isCotalError(err: unknown, code?: CotalErrorCode): err is CotalError {
  return err instanceof CotalError && (code === undefined || err.code === code);
}

/**
 * The code of an error another Cotal process sent (a daemon's or the supervisor's reply): kept
 * as it came when it has a code's shape (the sender throws only listed codes), else `fallback`.
 */
export function codeFrom(value: unknown, fallback: CotalErrorCode): CotalErrorCode {
  return typeof value === "string" && /^[a-z0-9_]{1,64}$/.test(value)
    ? value as CotalErrorCode
    : fallback;
}
