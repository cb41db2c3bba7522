/**
 * The shapes a command declares once (its flags and positionals) and the `ParsedArgs` every
 * command and daemon runner receives.
 *
 * @module
 */

/** One flag. The spec drives parsing, `--help` text and the usage line. */
export interface FlagSpec {
  /** `"string"` takes a value (`--space x` or `--space=x`); `"boolean"` takes none. */
  readonly type: "string" | "boolean";
  /** One-letter alias (`-s`). `h` is reserved for help. */
  readonly short?: string;
  /** Accept the flag more than once, collecting an array. Without it a repeat is refused. */
  readonly multiple?: boolean;
  /** Value when the flag is absent (an array when `multiple`). */
  readonly default?: string | boolean | readonly string[] | readonly boolean[];
  /** One line for `--help`. */
  readonly description: string;
  /** Refuse the command when this flag is absent. */
  readonly required?: boolean;
  /** Placeholder shown in help for the value (`--server <url>`); defaults to the flag name. */
  readonly value?: string;
}

/** A command's flags, keyed by long name (`space` for `--space`). */
export type FlagsSpec = Readonly<Record<string, FlagSpec>>;

/** One positional argument, in order. Only the last may be `variadic`. */
export interface PositionalSpec {
  /** Name shown in usage (`<name>`). */
  readonly name: string;
  /** One line for `--help`. */
  readonly description: string;
  /** Refuse the command when it is missing. */
  readonly required?: boolean;
  /** Collect every remaining argument. */
  readonly variadic?: boolean;
}

/** What the parser and help generator need from a command. */
export interface CommandSpec {
  /** The name it is invoked by, one or two words (`up`, `space add`). */
  readonly name: string;
  /** One line: what the command does. */
  readonly summary: string;
  /** Its flags. */
  readonly flags: FlagsSpec;
  /** Its positionals; absent means any positional is refused. */
  readonly positionals?: readonly PositionalSpec[];
}

/** A parsed flag value. */
export type FlagValue = string | boolean | string[] | boolean[] | undefined;

/**
 * The CLI-shaped arguments every command and daemon runner takes: exactly what `node:util`
 * `parseArgs` yields, plus `raw`, the argv the command was given (after its name). A host
 * embedding a runner fabricates one:
 * `{ values: { space, server, port: "0" }, positionals: [], raw: [] }`.
 */
export interface ParsedArgs<
  V extends Readonly<Record<string, FlagValue>> = Record<string, FlagValue>,
> {
  /** Flag values by name. */
  values: V;
  /** The positional arguments. */
  positionals: string[];
  /** The argv as given. */
  raw: string[];
}

/**
 * The parsed value type of one flag spec. A wide `FlagSpec` (type not narrowed by `as const`)
 * falls through to the loose `FlagValue`.
 */
export type ValueOf<S extends FlagSpec> = [S["type"]] extends ["boolean"]
  ? (S["multiple"] extends true ? boolean[] : boolean)
  : [S["type"]] extends ["string"] ? (S["multiple"] extends true ? string[] : string)
  : FlagValue;

/** Value types derived from an `as const` flag spec; required or defaulted flags are never undefined. */
export type FlagValues<F extends FlagsSpec> = {
  [K in keyof F]: F[K] extends { readonly required: true } | { readonly default: unknown }
    ? ValueOf<F[K]>
    : ValueOf<F[K]> | undefined;
};
