/**
 * The shared extension registry and the extension contracts.
 *
 * Packages self-register their commands, runtimes, connectors and auth providers on import;
 * a composition root imports what it wants and resolves them by `kind` and `name`. Keys are
 * `kind:name`, and a name is taken once: registering a second provider under a taken key is
 * refused, so two auth providers cannot silently shadow each other.
 *
 * @module
 */

import { CotalError } from "./errors.ts";
import type { FlagsSpec, FlagValues, ParsedArgs, PositionalSpec } from "./command_types.ts";
import type { SecretStore } from "./workspace/mod.ts";

/** A CLI command: its flags are declared once and drive parsing, `--help` and usage. */
export interface Command<F extends FlagsSpec = FlagsSpec> {
  /** Marks a command plugin. */
  readonly kind: "command";
  /** One or two words (`up`, `space add`). */
  readonly name: string;
  /** One line for the command list and `--help`. */
  readonly summary: string;
  /** Its flags, parsed before `run`. */
  readonly flags: F;
  /** Absent means the command takes no positionals. */
  readonly positionals?: readonly PositionalSpec[];
  /** Left out of the command list (plumbing). */
  readonly hidden?: boolean;
  /** Run with parsed arguments; the resolved number (default 0) is the exit code. */
  run(args: ParsedArgs<FlagValues<F>>): Promise<number | void>;
}

/** How to start an agent program: what a connector builds and a runtime spawns. */
export interface LaunchSpec {
  /** The program to execute (an absolute path). */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** The child's whole environment (nothing is inherited); never put secrets here. */
  readonly env?: Readonly<Record<string, string>>;
  /** Its working directory. */
  readonly cwd?: string;
}

/** How a runtime's child ended: an exit code, or the signal that killed it. */
export interface RuntimeExit {
  /** The exit code, or null when a signal ended it. */
  readonly code: number | null;
  /** The signal that ended it, or null. */
  readonly signal: string | null;
}

/** A running child under a runtime. Listener registrations return their unsubscribe. */
export interface RuntimeHandle {
  /** The child's host pid. */
  readonly pid: number;
  /** Writes to the child's input (its terminal on a pty). */
  write(data: string | Uint8Array): void;
  /** Resizes the child's terminal (a no-op without a pty). */
  resize(cols: number, rows: number): void;
  /** Sends the child a signal (default SIGTERM). */
  kill(signal?: Deno.Signal): void;
  /** Calls `listener` with each chunk the child prints. */
  onData(listener: (data: Uint8Array) => void): () => void;
  /** Calls `listener` once, when the child exits. */
  onExit(listener: (exit: RuntimeExit) => void): () => void;
}

/** Terminal size and the like for one spawn. */
export interface SpawnOptions {
  /** Terminal columns. */
  readonly cols?: number;
  /** Terminal rows. */
  readonly rows?: number;
}

/** A spawn backend (the pty runtime is built in). */
export interface Runtime {
  /** Marks a runtime plugin. */
  readonly kind: "runtime";
  /** The name `--runtime` selects it by. */
  readonly name: string;
  /** Whether this backend can run here (e.g. its native addon loads). */
  available(): Promise<boolean>;
  /** Starts `spec` and returns its handle. */
  spawn(spec: LaunchSpec, options?: SpawnOptions): Promise<RuntimeHandle>;
}

/** What a connector knows when it builds an agent's launch. */
export interface LaunchContext {
  /** The space the agent joins. */
  readonly space: string;
  /** The agent's name in the space. */
  readonly agent: string;
  /** The role whose tasks it serves, if any. */
  readonly role?: string;
  /** The directory it runs in. */
  readonly cwd: string;
  /** The agent's 0600 launch-material file (servers, creds or bearer source). */
  readonly materialPath: string;
  /** The model a harness should use, if the spawn names one. */
  readonly model?: string;
  /** The initial instructions, if the spawn gives any. */
  readonly prompt?: string;
}

/** Knows how to launch one kind of agent harness. */
export interface Connector {
  /** Marks a connector plugin. */
  readonly kind: "connector";
  /** The agent type (`claude`, `codex`, ...). */
  readonly name: string;
  /** Executables the harness needs on PATH, checked before anything is provisioned. */
  readonly requires?: readonly string[];
  /** The program (and its arguments and env) that runs this agent. */
  buildLaunch(context: LaunchContext): LaunchSpec | Promise<LaunchSpec>;
}

/** What an auth provider is built from: its space, the secret store, a non-secret state dir. */
export interface AuthProviderContext {
  /** The space the provider serves. */
  readonly space: string;
  /** Where its keys and state are kept. */
  readonly store: SecretStore;
  /** Its own state directory (opened as a file store). */
  readonly stateDir: string;
}

/** A user-mode client's credentials: a short-lived bearer and the sentinel creds it rides on. */
export interface UserCredentials {
  /** A short-lived bearer the auth callout accepts. */
  readonly bearer: string;
  /** The sentinel creds a client connects with to present the bearer. */
  readonly sentinelCreds: string;
}

/** A live auth provider for one space. */
export interface AuthProviderSession {
  /** Credentials for `actor`, minted by the provider. */
  userCredentials(request: { readonly actor: string }): Promise<UserCredentials>;
  /** Releases what the session holds. */
  close(): Promise<void>;
}

/** The user-mode auth seam: a named factory of per-space sessions. */
export interface AuthProvider {
  /** Marks an auth-provider plugin. */
  readonly kind: "auth-provider";
  /** The name it is registered under. */
  readonly name: string;
  /** Opens a session for one space. */
  create(context: AuthProviderContext): Promise<AuthProviderSession>;
}

/**
 * Kind name to contract. Modules adding a kind augment this interface
 * (`declare module "./registry.ts" { interface ExtensionKinds { ... } }`).
 */
export interface ExtensionKinds {
  /** Operator CLI commands. */
  command: Command;
  /** Spawn backends. */
  runtime: Runtime;
  /** Agent launchers. */
  connector: Connector;
  /** User-auth providers. */
  "auth-provider": AuthProvider;
}

/** A registered kind. */
export type ExtensionKind = keyof ExtensionKinds;
/** Anything that can be registered. */
export type Extension = ExtensionKinds[ExtensionKind];

function keyOf(kind: string, name: string): string {
  return `${kind}:${name}`;
}

/** A map of extensions keyed `kind:name`; {@linkcode registry} is the shared instance. */
export class Registry {
  readonly #entries = new Map<string, Extension>();

  /**
   * Register every entry, or none: a malformed entry, a taken key, or a key repeated within
   * `entries` refuses the whole batch (code `registry_duplicate` or `registry_bad_entry`).
   */
  register(entries: readonly Extension[]): void {
    const batch = new Map<string, Extension>();
    for (const entry of entries) {
      const kind: unknown = entry?.kind;
      const name: unknown = entry?.name;
      if (typeof kind !== "string" || kind === "" || kind.includes(":")) {
        throw new CotalError(
          "registry_bad_entry",
          `An extension has kind ${JSON.stringify(kind)}; give it a non-empty kind without ":".`,
        );
      }
      if (typeof name !== "string" || name.trim() === "") {
        throw new CotalError(
          "registry_bad_entry",
          `A ${kind} extension has no name; give it a non-empty name.`,
        );
      }
      const key = keyOf(kind, name);
      if (this.#entries.has(key) || batch.has(key)) {
        throw new CotalError(
          "registry_duplicate",
          `The extension "${key}" is already registered; nothing from this batch was registered, so rename one of them or import only one provider.`,
        );
      }
      batch.set(key, entry);
    }
    for (const [key, entry] of batch) this.#entries.set(key, entry);
  }

  /** The extension under `kind:name`; unknown keys throw `registry_unknown` naming the key. */
  resolve<K extends ExtensionKind>(kind: K, name: string): ExtensionKinds[K] {
    const found = this.find(kind, name);
    if (found === undefined) {
      const known = this.list(kind).map((e) => e.name);
      throw new CotalError(
        "registry_unknown",
        `No extension "${keyOf(kind, name)}" is registered${
          known.length > 0 ? ` (known ${kind}s: ${known.join(", ")})` : ""
        }; check the name or import the package that provides it.`,
      );
    }
    return found;
  }

  /** The extension under `kind:name`, or `undefined`. */
  find<K extends ExtensionKind>(kind: K, name: string): ExtensionKinds[K] | undefined {
    // Every entry stored under `kind:` was registered with that kind.
    return this.#entries.get(keyOf(kind, name)) as ExtensionKinds[K] | undefined;
  }

  /** Every extension of `kind`, sorted by name. */
  list<K extends ExtensionKind>(kind: K): ExtensionKinds[K][] {
    const found: ExtensionKinds[K][] = [];
    for (const entry of this.#entries.values()) {
      if (entry.kind === kind) found.push(entry as ExtensionKinds[K]);
    }
    return found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Remove `kind:name`; true when it was registered. */
  unregister(kind: ExtensionKind, name: string): boolean {
    return this.#entries.delete(keyOf(kind, name));
  }
}

/** The process-wide registry composition roots pull surfaces from. */
export const registry: Registry = new Registry();
