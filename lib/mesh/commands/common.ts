import { CotalError } from "../../errors.ts";

/** The `--root` flag every mesh command takes. */
export const ROOT_FLAG = {
  root: {
    type: "string",
    value: "dir",
    description: "the state directory (default: ./.cotal)",
  },
} as const;

/** The state directory a command works on. */
export function resolveRoot(flag: string | undefined): string {
  const root = flag ?? `${Deno.cwd()}/.cotal`;
  return root.startsWith("/") ? root : `${Deno.cwd()}/${root}`;
}

/** A TCP port from a flag, refused with a sentence when it is not one. */
export function parsePort(text: string, flag = "--port"): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new CotalError(
      "usage",
      `${flag} must be a whole number from 1 to 65535, not '${text}'; run 'cotal up --help'.`,
    );
  }
  return port;
}
