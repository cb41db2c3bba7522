/**
 * `cotal space backup|restore`: one space's streams (server snapshots: messages, sequences and
 * consumers), its account record and its per-space secrets, moved to and from a directory. A
 * restore re-signs the account under the target root's operator with the same keys, so the
 * space's existing credentials keep working on the new broker.
 */
import { cotalCommand } from "../cli/mod.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import {
  adoptSpaceAccount,
  mintCreds,
  newIdentity,
  parseSpaceAccountAuth,
  serializeSpaceAccountAuth,
} from "../trust/mod.ts";
import { decodeJwt, parseCreds } from "../nats/mod.ts";
import { bucketNames, connectBroker } from "../wire/mod.ts";
import {
  CONNECTION_EVICTOR_CREDS_KIND,
  createOnce,
  doctorAuth,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  spaceAccountKey,
  spaceKeyHex,
  workspaceSecretStore,
} from "../workspace/mod.ts";
import { meshPaths } from "./layout.ts";
import { restoreStream, type SnapshotHeader, snapshotStream } from "./snapshot.ts";
import { runningBroker, spaceIncomplete, spaceStreamList, startSpaceDaemons } from "./space.ts";
import {
  ensureBrokerAuth,
  loadSpaceAccount,
  readSpaceIndex,
  writeSpaceIndex,
} from "./trust_state.ts";
import { provisionSpace, renderBrokerConfig } from "./space_setup.ts";
import { brokerNotRunning, reloadBroker } from "./stack.ts";
import { registerMesh } from "../workspace/mod.ts";

function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

/** The format tag a backup's manifest carries. */
export const BACKUP_FORMAT = "cotal-space-backup/1";

/** What a backup holds, as its manifest says. */
export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  space: string;
  account: string;
  createdAt: string;
  streams: { name: string; file: string; bytes: number; config: unknown; state: unknown }[];
  /** Runtime-state streams (presence, leases), recreated empty on restore. */
  skipped: string[];
  secrets: string[];
  /** What the operator still has to do after a restore (a sentence each); absent when nothing. */
  next?: string[];
}

function writePrivate(path: string, data: string | Uint8Array): Promise<void> {
  return writeFileAtomic(path, data, { what: "The backup file" });
}

// Every Cotal cred may subscribe only to its own `_INBOX_<user key>` (see lib/wire/connect.ts).
async function inboxPrefixOf(creds: string): Promise<string> {
  const { jwt } = await parseCreds(creds);
  return `_INBOX_${(await decodeJwt(jwt)).sub}`;
}

async function requireLive(root: string) {
  const live = await runningBroker(root);
  if (!live) {
    throw await brokerNotRunning(root, " first");
  }
  return live;
}

/** Backs one space up into `dir` (which must be absent or empty). The manifest is written last. */
export async function spaceBackup(
  root: string,
  space: string,
  dir: string,
  opts: { onProgress?: (line: string) => void } = {},
): Promise<BackupManifest> {
  const say = opts.onProgress ?? (() => {});
  const store = workspaceSecretStore(root);
  const account = await loadSpaceAccount(store, space);
  if (!account) {
    throw new CotalError(
      "space_unknown",
      `Space '${space}' is not served by ${root}; 'cotal space list' shows the spaces it has.`,
    );
  }
  try {
    if ([...Deno.readDirSync(dir)].length > 0) {
      throw new CotalError(
        "backup_dir_not_empty",
        `${dir} is not empty; back up into a new or empty directory so nothing is overwritten.`,
      );
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const live = await requireLive(root);
  await Deno.mkdir(`${dir}/streams`, { recursive: true, mode: 0o700 });
  await Deno.mkdir(`${dir}/secrets`, { recursive: true, mode: 0o700 });
  const creds = await mintCreds(
    { space, account: account.account },
    newIdentity(),
    "backup",
  );
  const nc = await connectBroker({ servers: live.url, creds }, { name: "cotal space backup" });
  const streams: BackupManifest["streams"] = [];
  const b = bucketNames(space);
  const runtime = new Set([b.presence, b.delivery, b.manager].map((n) => `KV_${n}`));
  const skipped: string[] = [];
  try {
    const jsm = await nc.jetstreamManager();
    const names = spaceStreamList(space);
    for (const [i, name] of names.entries()) {
      let info;
      try {
        info = await jsm.streams.info(name);
      } catch {
        continue; // A bucket the space never created.
      }
      // Runtime state is not backed up: presence rows and the daemons' leases are rebuilt within
      // seconds, and a restored lease would lock out the restored space's own daemon until it
      // aged out. (nats-server 2.10 cannot snapshot memory streams at all.) The restore
      // recreates these buckets empty.
      if (String(info.config.storage) === "memory" || runtime.has(name)) {
        skipped.push(name);
        continue;
      }
      const file = `streams/${name}.snap`;
      const out = await Deno.open(`${dir}/${file}`, {
        write: true,
        createNew: true,
        mode: 0o600,
      });
      try {
        let written = 0;
        say(`snapshot of ${name} (${i + 1}/${names.length})`);
        const h = await snapshotStream(nc, name, async (chunk) => {
          await out.write(chunk);
          written += chunk.length;
          say(`snapshot of ${name} (${i + 1}/${names.length}): ${mib(written)}`);
        }, { inboxPrefix: await inboxPrefixOf(creds) });
        streams.push({ name, file, bytes: h.bytes, config: h.config, state: h.state });
      } finally {
        out.close();
      }
    }
  } finally {
    await nc.close();
  }
  await writePrivate(`${dir}/account.json`, serializeSpaceAccountAuth(account));
  const secrets: string[] = [];
  const spaceDir = `${meshPaths(root).store}/space.${spaceKeyHex(space)}`;
  try {
    for (const e of Deno.readDirSync(spaceDir)) {
      if (!e.isFile) continue;
      await writePrivate(`${dir}/secrets/${e.name}`, await Deno.readFile(`${spaceDir}/${e.name}`));
      secrets.push(e.name);
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const manifest: BackupManifest = {
    format: BACKUP_FORMAT,
    space,
    account: account.account.pub,
    createdAt: new Date().toISOString(),
    streams,
    skipped,
    secrets: secrets.sort(),
  };
  await writePrivate(`${dir}/manifest.json`, JSON.stringify(manifest, null, 2) + "\n");
  return manifest;
}

async function readManifest(dir: string): Promise<BackupManifest> {
  let m: BackupManifest;
  try {
    m = JSON.parse(await Deno.readTextFile(`${dir}/manifest.json`));
  } catch {
    throw new CotalError(
      "backup_unreadable",
      `${dir} holds no readable manifest.json; point at a directory 'cotal space backup' wrote.`,
    );
  }
  if (m.format !== BACKUP_FORMAT || typeof m.space !== "string" || !Array.isArray(m.streams)) {
    throw new CotalError(
      "backup_unreadable",
      `${dir}/manifest.json is not a ${BACKUP_FORMAT} manifest; it cannot be restored.`,
    );
  }
  for (const s of m.streams) {
    if (!/^streams\/[A-Za-z0-9_-]+\.snap$/.test(s.file)) {
      throw new CotalError("backup_unreadable", `The manifest names an unsafe file '${s.file}'.`);
    }
  }
  for (const f of m.secrets ?? []) {
    if (!/^[A-Za-z0-9._-]+$/.test(f) || f.startsWith(".")) {
      throw new CotalError("backup_unreadable", `The manifest names an unsafe secret '${f}'.`);
    }
  }
  return m;
}

async function* fileChunks(path: string): AsyncIterable<Uint8Array> {
  const f = await Deno.open(path);
  try {
    const buf = new Uint8Array(128 * 1024);
    for (;;) {
      const n = await f.read(buf);
      if (n === null) return;
      yield buf.slice(0, n);
    }
  } finally {
    f.close();
  }
}

/**
 * Restores a backed-up space into a root whose broker runs (a fresh broker, another operator,
 * or the same root after `space rm`). Refuses a root that already serves the space.
 */
export async function spaceRestore(
  root: string,
  dir: string,
  opts: { onProgress?: (line: string) => void } = {},
): Promise<BackupManifest> {
  const say = opts.onProgress ?? (() => {});
  const m = await readManifest(dir);
  const live = await requireLive(root);
  const index = await readSpaceIndex(root);
  if (index.spaces.includes(m.space)) {
    // Fault pass 9: a restore killed part-way leaves the space listed without its daemons.
    throw new CotalError(
      "space_exists",
      await spaceIncomplete(root, m.space)
        ? `${root} lists space '${m.space}' but not all of its daemons run (an interrupted ` +
          `restore or add); restore it again after 'cotal space rm ${m.space}', or start its ` +
          `daemons on what is there with 'cotal space add ${m.space}'.`
        : `${root} already serves space '${m.space}'; remove it with 'cotal space rm ${m.space}' first.`,
    );
  }
  const store = workspaceSecretStore(root);
  const saved = await parseSpaceAccountAuth(
    await Deno.readTextFile(`${dir}/account.json`),
    m.space,
  );
  if (saved.account.pub !== m.account) {
    throw new CotalError(
      "backup_unreadable",
      `${dir}/account.json is not the account the manifest names; the backup is mixed up.`,
    );
  }
  const { broker } = await ensureBrokerAuth(store, "cotal");
  const adopted = await adoptSpaceAccount(broker, saved);
  if (!await createOnce(store, spaceAccountKey(m.space), serializeSpaceAccountAuth(adopted))) {
    throw new CotalError(
      "space_exists",
      `${root} already holds an account record for '${m.space}'; remove it first.`,
    );
  }
  const spaceDir = `${meshPaths(root).store}/space.${spaceKeyHex(m.space)}`;
  await Deno.mkdir(spaceDir, { recursive: true, mode: 0o700 });
  for (const f of m.secrets ?? []) {
    await writePrivate(`${spaceDir}/${f}`, await Deno.readFile(`${dir}/secrets/${f}`));
  }
  index.spaces.push(m.space);
  await writeSpaceIndex(root, index);
  await renderBrokerConfig(root, live);
  await reloadBroker(root);
  const creds = await mintCreds(
    { space: m.space, account: adopted.account },
    newIdentity(),
    "backup",
  );
  const nc = await connectBroker({ servers: live.url, creds }, { name: "cotal space restore" });
  try {
    for (const [i, s] of m.streams.entries()) {
      say(`restoring ${s.name} (${i + 1}/${m.streams.length}, ${mib(s.bytes)})`);
      await restoreStream(
        nc,
        { config: s.config, state: s.state } as SnapshotHeader,
        fileChunks(`${dir}/${s.file}`),
      );
    }
  } finally {
    await nc.close();
  }
  say(`provisioning space '${m.space}' and starting its daemons`);
  await provisionSpace(adopted, live.url, root);
  await startSpaceDaemons(root, store, adopted);
  await registerMesh({ space: m.space, root, url: live.url });
  // The space's $SYS creds are its root's system account's: restored from another root they
  // are foreign or missing, and its membership view and evictions are down until they are
  // issued here, which only the system seed can do. Said with the command (newcomer pass 8
  // found it only in status).
  const sysKinds: string[] = [MEMBERSHIP_OBSERVER_CREDS_KIND, CONNECTION_EVICTOR_CREDS_KIND];
  const unusable = (await doctorAuth(root, store).catch(() => [])).filter((r) =>
    r.space === m.space && sysKinds.includes(r.kind) &&
    (r.status === "foreign" || r.status === "missing")
  );
  const next = unusable.length
    ? [
      `the space's $SYS creds (${
        unusable.map((r) => `${r.kind} ${r.status}`).join(", ")
      }) must be issued by this root's system account, so its live-member view and evictions ` +
      `are down until then: '${cotalCommand()} down --root ${root} --keep-agents && ` +
      `${cotalCommand()} up --root ${root}' (add --detach if the stack ran detached)`,
    ]
    : [];
  return { ...m, ...(next.length ? { next } : {}) };
}
