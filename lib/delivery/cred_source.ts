/**
 * Where the delivery daemon's cred comes from (an injected store, `--creds <file>`,
 * `--creds-dir <dir>` or the workspace store at `--root`: exactly one of them) and its first read.
 *
 * @module
 */
import type { ParsedArgs } from "../command_types.ts";
import { CotalError, isCotalError } from "../errors.ts";
import {
  deliveryCredsKey,
  type SecretStore,
  type SecretStoreComposition,
  spaceKeyHex,
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

/**
 * One space's creds as files named by their kind (`delivery.creds`, `membership-rw.creds`,
 * `membership-observer.creds`, ...) in one directory, read-only: what a systemd unit's
 * `LoadCredential=` lines give it in `$CREDENTIALS_DIRECTORY`. Any other key reads as absent.
 */
export function credsDirStore(dir: string, space: string): SecretStore {
  const prefix = `space.${spaceKeyHex(space)}/`;
  const refuse = (): never => {
    throw new CotalError(
      "store_read_only",
      `The creds dir ${dir} is read-only to the delivery daemon; its creds are re-signed into ` +
        `the space's store, and its unit restarts onto them.`,
    );
  };
  return {
    async get(key: string) {
      const kind = key.startsWith(prefix) ? key.slice(prefix.length) : "";
      if (kind === "" || kind.includes("/") || kind.startsWith(".")) return undefined;
      try {
        return await Deno.readTextFile(`${dir}/${kind}`);
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) return undefined;
        throw err;
      }
    },
    put: refuse,
    delete: refuse,
  };
}

/** The one cred source `args` and `store` name; refuses a conflict or none at all. */
export function resolveCredSource(
  args: ParsedArgs,
  space: string,
  store?: SecretStore,
): CredSource {
  const credsPath = flagValue(args, "creds");
  const root = flagValue(args, "root");
  const credsDir = flagValue(args, "creds-dir");
  if (credsDir !== undefined) {
    if (store || credsPath !== undefined || root !== undefined) {
      throw new CotalError(
        "cred_source_conflict",
        "--creds-dir is the daemon's only cred source; drop --creds and --root (and any " +
          "injected store).",
      );
    }
    const dirStore = credsDirStore(credsDir, space);
    const at = { injected: true } as const;
    const key = deliveryCredsKey(space, at);
    return {
      reader: { describe: `${credsDir}/delivery.creds`, read: () => dirStore.get(key) },
      store: dirStore,
      composition: at,
      injected: false,
    };
  }
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
      "--creds <file>, --creds-dir <dir>, or inject a secret store.",
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
