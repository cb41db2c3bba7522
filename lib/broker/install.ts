import { CotalError } from "../errors.ts";
import { findDebianMirror, readAptSources } from "./apt_sources.ts";
import { assertSupported, cachedServerPath, type FoundServer, probeServerVersion } from "./find.ts";
import { findServer, projectCacheDir } from "./find.ts";

/** Options for {@linkcode installServer}. */
export interface InstallOptions {
  cacheDir?: string;
  /** Where apt's configuration lives; tests point this at sample files. */
  etcApt?: string;
  /** Called with one line per step (downloading lists, fetching the package, ...). */
  onProgress?: (line: string) => void;
}

// Newest first: apt's candidate is the highest version across these, so the newest suite that
// carries nats-server wins. COTAL_NATS_SUITE narrows it to one (e.g. "stable" for 2.10.x).
const SUITES = ["unstable", "testing", "stable"];

const MANUAL =
  "install nats-server 2.10 or newer yourself (Debian/Ubuntu: 'apt-get install nats-server'; " +
  "or a release binary) and put it on PATH or in NATS_SERVER";

async function run(cmd: string, args: string[]): Promise<string> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  } catch (err) {
    throw new CotalError(
      "broker_install_failed",
      `Could not run ${cmd} (${(err as Error).message}); ${MANUAL}.`,
    );
  }
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    const tail = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" | ");
    throw new CotalError(
      "broker_install_failed",
      `${cmd} ${args.at(-1)} failed (${tail}); ${MANUAL}.`,
    );
  }
  return stdout;
}

/**
 * Installs nats-server into the project cache without touching the system: apt's own tools,
 * pointed at a private state dir and the machine's configured Debian mirror, download the
 * package; only the binary is extracted, then its `--version` is verified.
 */
export async function installServer(opts: InstallOptions = {}): Promise<FoundServer> {
  const cacheDir = opts.cacheDir ?? projectCacheDir();
  const say = opts.onProgress ?? (() => {});
  for (const tool of ["apt-get", "dpkg-deb"]) {
    try {
      await new Deno.Command(tool, { args: ["--version"], stdout: "null", stderr: "null" })
        .output();
    } catch {
      throw new CotalError(
        "broker_no_apt",
        `nats-server is not installed and this machine has no ${tool} to fetch it; ${MANUAL}.`,
      );
    }
  }
  const mirror = findDebianMirror(await readAptSources(opts.etcApt));
  if (!mirror) {
    throw new CotalError(
      "broker_no_mirror",
      `No Debian mirror with 'main' is configured in ${opts.etcApt ?? "/etc/apt"}; ${MANUAL}.`,
    );
  }
  const aptDir = `${cacheDir}/nats-server/apt`;
  for (const d of ["lists/partial", "archives/partial", "etc/preferences.d"]) {
    await Deno.mkdir(`${aptDir}/${d}`, { recursive: true });
  }
  const suites = Deno.env.get("COTAL_NATS_SUITE")?.split(",") ?? SUITES;
  const signed = mirror.signedBy ? `[signed-by=${mirror.signedBy}] ` : "";
  await Deno.writeTextFile(
    `${aptDir}/etc/sources.list`,
    suites.map((s) => `deb ${signed}${mirror.uri} ${s} main\n`).join(""),
  );
  const aptOpts = [
    `-o`,
    `Dir::State=${aptDir}`,
    `-o`,
    `Dir::State::Lists=${aptDir}/lists`,
    `-o`,
    `Dir::State::status=/dev/null`,
    `-o`,
    `Dir::Cache=${aptDir}`,
    `-o`,
    `Dir::Cache::archives=${aptDir}/archives`,
    `-o`,
    `Dir::Etc::SourceList=${aptDir}/etc/sources.list`,
    `-o`,
    `Dir::Etc::SourceParts=/dev/null`,
    `-o`,
    `Dir::Etc::PreferencesParts=${aptDir}/etc/preferences.d`,
    `-o`,
    `Debug::NoLocking=1`,
    `-o`,
    `APT::Sandbox::User=root`,
    `-q`,
  ];
  say(`fetching package lists for ${suites.join(", ")} from the configured Debian mirror`);
  await run("apt-get", [...aptOpts, "update"]);
  say("downloading the nats-server package");
  const work = await Deno.makeTempDir({ prefix: "cotal-nats-" });
  try {
    const dl = new Deno.Command("apt-get", {
      args: [...aptOpts, "download", "nats-server"],
      cwd: work,
      stdout: "piped",
      stderr: "piped",
    });
    const res = await dl.output();
    if (!res.success) {
      const tail = new TextDecoder().decode(res.stderr).trim().split("\n").slice(-2).join(" | ");
      throw new CotalError(
        "broker_install_failed",
        `The mirror has no downloadable nats-server package (${tail}); ${MANUAL}.`,
      );
    }
    const deb = [...Deno.readDirSync(work)].find((e) => e.name.endsWith(".deb"));
    if (!deb) {
      throw new CotalError("broker_install_failed", `apt-get download left no .deb; ${MANUAL}.`);
    }
    say(`extracting ${deb.name}`);
    await run("dpkg-deb", ["-x", `${work}/${deb.name}`, `${work}/root`]);
    const target = cachedServerPath(cacheDir);
    await Deno.mkdir(target.replace(/\/[^/]+$/, ""), { recursive: true });
    // Copy then rename so a half-copied binary is never found by the next run.
    // Debian ships it in /usr/sbin from 2.11 on and /usr/bin before.
    const inside = ["usr/sbin/nats-server", "usr/bin/nats-server"].map((p) => `${work}/root/${p}`)
      .find((p) => {
        try {
          return Deno.statSync(p).isFile;
        } catch {
          return false;
        }
      });
    if (!inside) {
      throw new CotalError(
        "broker_install_failed",
        `${deb.name} holds no nats-server binary; ${MANUAL}.`,
      );
    }
    await Deno.copyFile(inside, `${target}.tmp`);
    await Deno.chmod(`${target}.tmp`, 0o755);
    const version = await probeServerVersion(`${target}.tmp`);
    assertSupported(deb.name, version);
    await Deno.rename(`${target}.tmp`, target);
    say(`installed nats-server ${version.text} at ${target}`);
    return { path: target, version, source: "cache" };
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

/** Finds nats-server, installing it into the project cache when absent. */
export async function ensureServer(opts: InstallOptions = {}): Promise<FoundServer> {
  return await findServer(opts.cacheDir) ?? await installServer(opts);
}
