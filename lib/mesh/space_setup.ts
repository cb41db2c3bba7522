/**
 * Setting a space up on a root: its record in the root's trust and index, the broker config
 * rendered for every space (checked by nats-server before it is used), and its streams,
 * buckets and default delivery class. `up`, `space add`, `space rm` and `space restore` share
 * these.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError, isCotalError } from "../errors.ts";
import {
  ensureDefaultDeliveryClass,
  errorText,
  setupSpaceStreams,
  type SpaceSetupResult,
} from "../wire/mod.ts";
import {
  BROKER_MAX_CONNECTIONS,
  mintCreds,
  newIdentity,
  serverConfig,
  SPACE_JETSTREAM_LIMITS,
  type SpaceAccountAuth,
} from "../trust/mod.ts";
import { workspaceSecretStore } from "../workspace/mod.ts";
import { ensureMeshDirs, meshPaths } from "./layout.ts";
import { ensureUserAuthSecrets, readUserAuth } from "./user_auth.ts";
import { brokerBinary, componentFiles } from "./stack.ts";
import { checkOperatorInclude, OPERATOR_INCLUDE, testBrokerConfig } from "./broker_include.ts";
import {
  ensureBrokerAuth,
  ensureSpaceAccount,
  loadAllSpaceAccounts,
  readSpaceIndex,
  writeSpaceIndex,
} from "./trust_state.ts";

/** Renders the broker config for every space of a root into its broker dir (0600). */
/**
 * The broker's connection cap on this machine: {@linkcode BROKER_MAX_CONNECTIONS}, or half the
 * open-file limit the broker inherits from this process when that is lower (nats-server raises
 * its soft limit to the hard one), so connections never take the descriptors JetStream needs.
 */
export async function brokerConnectionCap(): Promise<number> {
  const limits = await Deno.readTextFile("/proc/self/limits").catch(() => "");
  const hard = Number(/^Max open files\s+\S+\s+(\d+)/m.exec(limits)?.[1]);
  return Number.isFinite(hard) && hard > 0
    ? Math.max(64, Math.min(BROKER_MAX_CONNECTIONS, Math.floor(hard / 2)))
    : BROKER_MAX_CONNECTIONS;
}

export async function renderBrokerConfig(
  root: string,
  opts: { host: string; port: number; monitor?: string },
): Promise<{ accounts: SpaceAccountAuth[]; configPath: string }> {
  const p = meshPaths(root);
  const store = workspaceSecretStore(root);
  const { broker } = await ensureBrokerAuth(store, "cotal");
  const accounts = await loadAllSpaceAccounts(root, store);
  // User mode: each space's callout account is preloaded beside its data account.
  const userAuth = await readUserAuth(root);
  const extraAccounts = userAuth ? await ensureUserAuthSecrets(store, broker, accounts) : [];
  const includePath = `${p.brokerDir}/${OPERATOR_INCLUDE}`;
  const include = await Deno.readTextFile(includePath).catch((err) => {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw new CotalError(
      "operator_include_unreadable",
      `${includePath} cannot be read (${err.message}).`,
    );
  });
  if (include !== undefined) checkOperatorInclude(include, includePath);
  const config = serverConfig(
    broker,
    accounts.map((a) => ({ space: a.space, account: { pub: a.account.pub, jwt: a.account.jwt } })),
    {
      storeDir: p.jetstream,
      host: opts.host,
      port: opts.port,
      extraAccounts,
      logFile: componentFiles(root, "nats-server").logFile,
      ...(opts.monitor ? { monitor: opts.monitor } : {}),
      ...(include !== undefined ? { include: OPERATOR_INCLUDE } : {}),
      maxConnections: await brokerConnectionCap(),
    },
  );
  // The new config replaces the last good one only once nats-server accepts it.
  const candidate = `${p.brokerDir}/.nats.conf.candidate`;
  await writeFileAtomic(candidate, config, { what: "The broker's configuration" });
  try {
    await testBrokerConfig((await brokerBinary(() => {})).path, candidate);
    await Deno.rename(candidate, p.brokerConfig);
  } finally {
    await Deno.remove(candidate).catch(() => {});
  }
  return { accounts, configPath: p.brokerConfig };
}

/** Adds a space to the root (trust record + index), creating the broker trust when new. */
export async function addSpaceRecord(root: string, space: string): Promise<boolean> {
  const p = meshPaths(root);
  await ensureMeshDirs(p);
  const index = await readSpaceIndex(root);
  // Names that differ only by case would be two spaces an operator reads as one.
  const twin = index.spaces.find((s) => s !== space && s.toLowerCase() === space.toLowerCase());
  if (twin) {
    throw new CotalError(
      "space_case_conflict",
      `Space '${space}' differs from ${root}'s space '${twin}' only by case; use '${twin}' or another name.`,
    );
  }
  const store = workspaceSecretStore(root);
  const { broker } = await ensureBrokerAuth(store, "cotal");
  const { created } = await ensureSpaceAccount(store, broker, space);
  if (!index.spaces.includes(space)) {
    index.spaces.push(space);
    await writeSpaceIndex(root, index);
  }
  return created;
}

/** One line for a stream an older setup left in a shape the broker cannot move in place. */
export function outdatedStreamNote(space: string, stream: string): string {
  return `note: ${stream} of space '${space}' is a work queue from an older setup: it works, ` +
    `but it also stores tasks to roles no agent has, which a space set up now refuses to keep.`;
}

/**
 * Creates a space's streams, buckets and default delivery class with a short-lived provisioner.
 * A broker that could not give the space its JetStream reservation (too little disk) is
 * reported as such, read from its log under `root`.
 */
export async function provisionSpace(
  account: SpaceAccountAuth,
  servers: string,
  root?: string,
): Promise<SpaceSetupResult> {
  const creds = await mintCreds(
    { space: account.space, account: account.account },
    await newIdentity(),
    "provisioner",
  );
  try {
    const result = await setupSpaceStreams({ servers, space: account.space, creds });
    await ensureDefaultDeliveryClass({
      servers,
      space: account.space,
      creds,
      deliveryClass: "durable",
    });
    return result;
  } catch (err) {
    const log = root ? componentFiles(root, "nats-server").logFile : undefined;
    const text = log ? await Deno.readTextFile(log).catch(() => "") : "";
    const short = text.slice(-65536).match(/insufficient (storage|memory) resources available/g);
    if (short) {
      const gib = (SPACE_JETSTREAM_LIMITS.disk_storage! / 2 ** 30).toFixed(1);
      throw new CotalError(
        "storage_short",
        `The broker could not reserve JetStream storage for space '${account.space}': each ` +
          `space reserves ${gib} GiB on disk and ${
            (SPACE_JETSTREAM_LIMITS.mem_storage! / 2 ** 20).toFixed(0)
          } MiB of memory, and the broker offers 75 % of the disk that was free under ${
            root ? meshPaths(root).jetstream : "its store"
          } when it started; free space there (or put the root on a larger disk with --root), ` +
          `then run 'cotal up' again.`,
      );
    }
    if (isCotalError(err)) throw err;
    throw new CotalError(
      "provision_failed",
      `Could not create the streams of space '${account.space}' (${errorText(err)})${
        log ? `; see ${log}` : ""
      }.`,
    );
  }
}
