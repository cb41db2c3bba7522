/**
 * The channel registry (`cotal_channels_<s>`): per-channel config and the space defaults at
 * the reserved key `=defaults`. Delivery class and replay resolve through one rule
 * everywhere: the channel's value, else the space default, else `durable` / replay on.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import { type BrokerTarget, withBroker } from "./connect.ts";
import { bindKv, jsonBytes, jsonObject, listKeys, liveEntry } from "./kv.ts";
import { assertConcreteChannel, describe } from "./names.ts";
import { bucketNames, CHANNEL_DEFAULTS_KEY } from "./resources.ts";
import { jsmCall, wrapJs } from "./js_errors.ts";

/** `live`: at-most-once core subscription. `durable`: live plus a per-member backstop. */
export type DeliveryClass = "live" | "durable";

/** Space-wide defaults, stored at `=defaults`. */
export interface ChannelDefaults {
  replay?: boolean;
  /** How far back a join replays: `<n>s|m|h|d`. */
  replayWindow?: string;
  deliveryClass?: DeliveryClass;
}

/** One channel's config. `description` and `instructions` reach models: advisory text only. */
export interface ChannelConfig extends ChannelDefaults {
  /** At most 200 characters. */
  description?: string;
  /** At most 2000 characters. */
  instructions?: string;
}

/** The whole registry as read. */
export interface ChannelRegistry {
  defaults: ChannelDefaults;
  channels: Record<string, ChannelConfig>;
}

/** Longest channel description accepted (rejected, never truncated). */
export const MAX_DESCRIPTION_LENGTH = 200;
/** Longest channel instructions accepted (rejected, never truncated). */
export const MAX_INSTRUCTIONS_LENGTH = 2000;
const REPLAY_WINDOW_RE = /^\d+(s|m|h|d)$/;
const DEFAULT_FIELDS = ["replay", "replayWindow", "deliveryClass"];
const CHANNEL_FIELDS = [...DEFAULT_FIELDS, "description", "instructions"];

function bad(where: string, problem: string): CotalError {
  return new CotalError(
    "invalid_channel_config",
    `The channel config for ${where} ${problem}.`,
  );
}

/** Refuse a delivery class other than `live` or `durable`. */
export function assertDeliveryClass(v: unknown): asserts v is DeliveryClass {
  if (v !== "live" && v !== "durable") {
    throw new CotalError(
      "invalid_delivery_class",
      `Delivery class ${describe(v)} is unknown; use "live" or "durable".`,
    );
  }
}

/**
 * Validate a config for the write path: unknown fields and oversized text are refused (never
 * dropped or truncated), so an operator's typo cannot silently change nothing.
 */
export function validateChannelConfig(
  cfg: ChannelConfig,
  opts: { where?: string; defaults?: boolean } = {},
): ChannelConfig {
  const where = opts.where ?? "the channel";
  if (typeof cfg !== "object" || cfg === null || Array.isArray(cfg)) {
    throw bad(where, "is not an object; pass { replay?, replayWindow?, deliveryClass?, ... }");
  }
  const allowed = opts.defaults ? DEFAULT_FIELDS : CHANNEL_FIELDS;
  for (const k of Object.keys(cfg)) {
    if (!allowed.includes(k)) {
      throw bad(where, `has unknown field ${describe(k)}; use only ${allowed.join(", ")}`);
    }
  }
  if (cfg.replay !== undefined && typeof cfg.replay !== "boolean") {
    throw bad(where, "has a non-boolean replay; set true or false");
  }
  if (
    cfg.replayWindow !== undefined &&
    (typeof cfg.replayWindow !== "string" || !REPLAY_WINDOW_RE.test(cfg.replayWindow))
  ) {
    throw bad(
      where,
      `has replayWindow ${describe(cfg.replayWindow)}; use <n>s, <n>m, <n>h or <n>d`,
    );
  }
  if (cfg.deliveryClass !== undefined) assertDeliveryClass(cfg.deliveryClass);
  for (
    const [k, max] of [["description", MAX_DESCRIPTION_LENGTH], [
      "instructions",
      MAX_INSTRUCTIONS_LENGTH,
    ]] as const
  ) {
    const v = cfg[k];
    if (v !== undefined && (typeof v !== "string" || v.length > max)) {
      throw bad(where, `has a ${k} that is not a string of at most ${max} characters; shorten it`);
    }
  }
  return { ...cfg };
}

/**
 * A stored registry row (`key` is a channel or `=defaults`) as the delivery daemon takes it, or
 * undefined when it is none: every field known and valid. Lenient reads would take any JSON
 * object for a config with no fields, and a member can aim a broker answer (a publish ack, an
 * API reply: JSON objects) at any key, silently resetting that channel to the defaults.
 */
export function strictChannelRow(key: string, value: Uint8Array): ChannelConfig | undefined {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(value));
  } catch {
    return undefined;
  }
  try {
    return validateChannelConfig(v as ChannelConfig, { defaults: key === CHANNEL_DEFAULTS_KEY });
  } catch {
    return undefined;
  }
}

/** Keep only the known fields of a stored row (unknown fields from newer writers are ignored). */
function readConfig(raw: Record<string, unknown>, fields: string[]): ChannelConfig {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (raw[f] !== undefined) out[f] = raw[f];
  return out as ChannelConfig;
}

/** The effective delivery class of `channel`: its own, else the default, else `durable`. */
export function effectiveDeliveryClass(reg: ChannelRegistry, channel: string): DeliveryClass {
  return reg.channels[channel]?.deliveryClass ?? reg.defaults.deliveryClass ?? "durable";
}

/** Whether joining `channel` replays history: its own, else the default, else true. */
export function effectiveReplay(reg: ChannelRegistry, channel: string): boolean {
  return reg.channels[channel]?.replay ?? reg.defaults.replay ?? true;
}

/** Options naming a space on a broker. */
export interface SpaceTarget extends BrokerTarget {
  /** The space. */
  space: string;
}

/** Options of {@linkcode ensureDefaultDeliveryClass}. */
export interface EnsureDefaultDeliveryClassOptions extends SpaceTarget {
  /** The class channels get when their row does not name one. */
  deliveryClass: DeliveryClass;
}

/**
 * Write the space's default delivery class at `=defaults` so it is discoverable on the wire,
 * unless one is already set: an operator's value is never overridden. Other default fields
 * already present are kept. Returns true when this call wrote it. Needs a `provisioner` or
 * `channel-writer` credential.
 */
export async function ensureDefaultDeliveryClass(
  opts: EnsureDefaultDeliveryClassOptions,
): Promise<boolean> {
  assertDeliveryClass(opts.deliveryClass);
  return await withBroker(
    opts,
    (nc) => ensureDefaultDeliveryClassOn(nc, opts.space, opts.deliveryClass),
  );
}

/** {@linkcode ensureDefaultDeliveryClass} on an existing connection. */
export async function ensureDefaultDeliveryClassOn(
  nc: NatsConnection,
  space: string,
  deliveryClass: DeliveryClass,
): Promise<boolean> {
  assertDeliveryClass(deliveryClass);
  const bucket = bucketNames(space).channels;
  const kv = await bindKv(nc, bucket);
  // Compare-and-set, retried: a concurrent writer must win or lose cleanly, never be clobbered.
  for (let attempt = 0; attempt < 5; attempt++) {
    const e = await liveEntry(kv, CHANNEL_DEFAULTS_KEY, bucket);
    const current = e ? jsonObject(e) : undefined;
    if (current?.deliveryClass !== undefined) return false;
    const next = { ...(current ?? {}), deliveryClass };
    try {
      if (e) await kv.update(CHANNEL_DEFAULTS_KEY, jsonBytes(next), e.revision);
      else await kv.create(CHANNEL_DEFAULTS_KEY, jsonBytes(next));
      return true;
    } catch (err) {
      // 10071: wrong last sequence, a concurrent writer got there first; read again.
      if ((err as { api_error?: { err_code?: number } })?.api_error?.err_code !== 10071) {
        throw wrapJs(`write the default delivery class of ${space}`, err);
      }
    }
  }
  throw new CotalError(
    "registry_contended",
    `The channel defaults of space ${
      describe(space)
    } kept changing under a concurrent writer; retry.`,
  );
}

/** Options of {@linkcode seedChannelRegistry}. */
export interface SeedChannelRegistryOptions extends SpaceTarget {
  /** Concrete channel name -> config. Each row is written as given (the operator's declaration). */
  channels: Record<string, ChannelConfig>;
  /** Space defaults to write at `=defaults`, replacing the row (an operator's explicit value). */
  defaults?: ChannelDefaults;
}

/**
 * Write channel configs (and optionally the defaults) into the registry. Every name and config
 * is validated before anything is written, so a bad entry writes nothing.
 */
export async function seedChannelRegistry(
  opts: SeedChannelRegistryOptions,
): Promise<{ written: string[] }> {
  const rows: [string, ChannelConfig][] = [];
  if (typeof opts.channels !== "object" || opts.channels === null) {
    throw bad("the registry", "is not a map of channel names to configs");
  }
  for (const [ch, cfg] of Object.entries(opts.channels)) {
    assertConcreteChannel(ch);
    rows.push([ch, validateChannelConfig(cfg, { where: `channel ${describe(ch)}` })]);
  }
  if (opts.defaults !== undefined) {
    rows.push([
      CHANNEL_DEFAULTS_KEY,
      validateChannelConfig(opts.defaults, { where: "the defaults", defaults: true }),
    ]);
  }
  const bucket = bucketNames(opts.space).channels;
  return await withBroker(opts, async (nc) => {
    const kv = await bindKv(nc, bucket);
    for (const [key, cfg] of rows) {
      await jsmCall(`write ${key} to ${bucket}`, () => kv.put(key, jsonBytes(cfg)));
    }
    return { written: rows.map(([k]) => k) };
  });
}

/** Read the whole registry (defaults plus every live channel row). */
export async function readChannelRegistry(opts: SpaceTarget): Promise<ChannelRegistry> {
  return await withBroker(opts, (nc) => readChannelRegistryOn(nc, opts.space));
}

/** {@linkcode readChannelRegistry} on an existing connection. */
export async function readChannelRegistryOn(
  nc: NatsConnection,
  space: string,
): Promise<ChannelRegistry> {
  const bucket = bucketNames(space).channels;
  const jsm = await nc.jetstreamManager();
  const kv = await bindKv(nc, bucket);
  const reg: ChannelRegistry = { defaults: {}, channels: {} };
  for (const key of await listKeys(jsm, bucket)) {
    const e = await liveEntry(kv, key, bucket);
    if (!e) continue;
    const raw = jsonObject(e);
    if (!raw) {
      throw new CotalError(
        "registry_corrupt",
        `The channel registry row ${describe(key)} in ${bucket} is not a JSON object; rewrite it ` +
          `with seedChannelRegistry.`,
      );
    }
    if (key === CHANNEL_DEFAULTS_KEY) reg.defaults = readConfig(raw, DEFAULT_FIELDS);
    else reg.channels[key] = readConfig(raw, CHANNEL_FIELDS);
  }
  return reg;
}
