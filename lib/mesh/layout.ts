/**
 * Where a root keeps its state: the broker dir (config, JetStream store), the secret store, the
 * run dir (pid files, locks, the mesh record, the watch list) and the logs, created 0700.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { writeError } from "../atomic_file.ts";

/** Where one mesh keeps its state under its root (`.cotal` by default). */
export interface MeshPaths {
  root: string;
  store: string;
  brokerDir: string;
  brokerConfig: string;
  jetstream: string;
  runDir: string;
  logDir: string;
}

/** The paths of a root; nothing is created. */
export function meshPaths(root: string): MeshPaths {
  return {
    root,
    store: `${root}/secrets`,
    brokerDir: `${root}/broker`,
    brokerConfig: `${root}/broker/nats.conf`,
    jetstream: `${root}/broker/js`,
    runDir: `${root}/run`,
    logDir: `${root}/logs`,
  };
}

/** Creates the root's directories with mode 0700 (tightening any that exist). */
export async function ensureMeshDirs(p: MeshPaths): Promise<void> {
  for (
    const d of [
      p.root,
      p.store,
      p.brokerDir,
      p.jetstream,
      p.runDir,
      `${p.runDir}/delivery`,
      p.logDir,
    ]
  ) {
    try {
      await Deno.mkdir(d, { recursive: true, mode: 0o700 });
      await Deno.chmod(d, 0o700);
    } catch (err) {
      if (err instanceof Deno.errors.AlreadyExists || err instanceof Deno.errors.NotADirectory) {
        throw new CotalError(
          "root_not_directory",
          `The state root ${JSON.stringify(p.root)} (or ${
            JSON.stringify(d)
          } in it) is a file, not a directory; pass --root a directory.`,
        );
      }
      throw writeError(d, "The state directory", err);
    }
  }
}
