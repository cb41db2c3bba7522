/**
 * Where the delivery daemon's cred comes from (an injected store, `--creds <file>` or the
 * workspace store at `--root`: exactly one of them) and its first read.
 *
 * @module
 */
import type { ParsedArgs } from "../cli/mod.ts";
import { CotalError, isCotalError } from "../errors.ts";
import {
  deliveryCredsKey,
  type SecretStore,
  type SecretStoreComposition,
  workspaceSecretStore,
} from "../workspace/mod.ts";
import type { CredReader } from "./cred_renewal.ts";

/** A flag's value: undefined when absent, refused when empty. */
export function flagValue(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v === "") {
    throw new CotalError("usage", `--${name} needs a non-empty value.`);
  }
  return v;
}

/** The delivery cred's reader, and the store the membership and `$SYS` kinds come from. */
export interface CredSource {
  reader: CredReader;
  /** The store the membership and `$SYS` kinds are read from, when there is one. */
  store?: SecretStore;
  composition?: SecretStoreComposition;
  injected: boolean;
}

/** The one cred source `args` and `store` name; refuses a conflict or none at all. */
export function resolveCredSource(
  args: ParsedArgs,
  space: string,
  store?: SecretStore,
): CredSource {
  const credsPath = flagValue(args, "creds");
  const root = flagValue(args, "root");
  if (store) {
    if (credsPath !== undefined) {
      throw new CotalError(
        "cred_source_conflict",
        "--creds cannot be combined with an injected secret store; the store is the only cred " +
          "source of a hosted composition.",
      );
    }
    const key = deliveryCredsKey(space, { injected: true });
    return {
      reader: { describe: key, read: () => store.get(key) },
      store,
      composition: { injected: true },
      injected: true,
    };
  }
  const ws = root !== undefined ? workspaceSecretStore(root) : undefined;
  const composition: SecretStoreComposition | undefined = root !== undefined ? { root } : undefined;
  if (credsPath !== undefined) {
    // The operator chose the file: it is the delivery cred's only source (the store's
    // delivery key is never read); the store, if any, still serves the membership kinds.
    return {
      reader: {
        describe: credsPath,
        read: () =>
          Deno.readTextFile(credsPath).catch((err) => {
            if (err instanceof Deno.errors.NotFound) return undefined;
            throw err;
          }),
      },
      store: ws,
      composition,
      injected: false,
    };
  }
  if (ws && composition) {
    const key = deliveryCredsKey(space, composition);
    return {
      reader: { describe: key, read: () => ws.get(key) },
      store: ws,
      composition,
      injected: false,
    };
  }
  throw new CotalError(
    "no_cred_source",
    "The delivery daemon has no cred source; pass --root <state dir> (the workspace store), " +
      "--creds <file>, or inject a secret store.",
  );
}

/** The cred text at `source`, or a refusal naming where it looked. */
export async function readFirstCred(source: CredSource, space: string): Promise<string> {
  let text: string | undefined;
  try {
    text = await source.reader.read();
  } catch (err) {
    throw new CotalError(
      "delivery_cred_unreadable",
      `Could not read the delivery cred at ${source.reader.describe} (${
        isCotalError(err) ? err.code : (err as Error)?.name ?? "error"
      }).`,
    );
  }
  if (text === undefined) {
    throw new CotalError(
      "missing_delivery_cred",
      `No delivery cred at ${source.reader.describe}; mint a delivery cred for space ` +
        `${
          JSON.stringify(space)
        } and put it there (launch the space with cotal up, or pass --creds).`,
    );
  }
  return text;
}
