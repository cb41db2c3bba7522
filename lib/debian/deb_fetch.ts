import { CotalError } from "../errors.ts";
import { findDebianMirror, readAptSources } from "./apt_sources.ts";

/** Options for {@linkcode fetchDebBinary}. */
export interface DebFetchOptions {
  /** The Debian package, e.g. `nats-server` or `bubblewrap`. */
  pkg: string;
  /** Paths of the wanted binary inside the package, tried in order (`usr/bin/bwrap`). */
  inside: string[];
  /** Where the binary goes; written via a temp file and a rename. */
  target: string;
  /** A private directory for apt's lists and downloads. */
  aptDir: string;
  /** Suites to consider; apt's candidate is the highest version across them. */
  suites: string[];
  /** What to tell people when this cannot work here (ends the error sentence). */
  manual: string;
  /** Where apt's configuration lives; tests point this at sample files. */
  etcApt?: string;
  onProgress?: (line: string) => void;
}

async function run(cmd: string, args: string[], manual: string, cwd?: string): Promise<void> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  } catch (err) {
    throw new CotalError(
      "install_failed",
      `Could not run ${cmd} (${(err as Error).message}); ${manual}.`,
    );
  }
  if (!out.success) {
    const tail = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" | ");
    throw new CotalError("install_failed", `${cmd} ${args.at(-1)} failed (${tail}); ${manual}.`);
  }
}

/**
 * Fetches one binary out of a Debian package without touching the system: apt's own tools,
 * pointed at a private state dir and the machine's configured Debian mirror, download the
 * package, and only the binary is extracted. Returns the target path.
 */
export async function fetchDebBinary(opts: DebFetchOptions): Promise<string> {
  const say = opts.onProgress ?? (() => {});
  for (const tool of ["apt-get", "dpkg-deb"]) {
    try {
      await new Deno.Command(tool, { args: ["--version"], stdout: "null", stderr: "null" })
        .output();
    } catch {
      throw new CotalError(
        "install_no_apt",
        `${opts.pkg} is not installed and this machine has no ${tool} to fetch it; ${opts.manual}.`,
      );
    }
  }
  const mirror = findDebianMirror(await readAptSources(opts.etcApt));
  if (!mirror) {
    throw new CotalError(
      "install_no_mirror",
      `No Debian mirror with 'main' is configured in ${opts.etcApt ?? "/etc/apt"}; ${opts.manual}.`,
    );
  }
  const d = opts.aptDir;
  for (const sub of ["lists/partial", "archives/partial", "etc/preferences.d"]) {
    await Deno.mkdir(`${d}/${sub}`, { recursive: true });
  }
  const signed = mirror.signedBy ? `[signed-by=${mirror.signedBy}] ` : "";
  await Deno.writeTextFile(
    `${d}/etc/sources.list`,
    opts.suites.map((s) => `deb ${signed}${mirror.uri} ${s} main\n`).join(""),
  );
  const aptOpts = [
    ["Dir::State", d],
    ["Dir::State::Lists", `${d}/lists`],
    ["Dir::State::status", "/dev/null"],
    ["Dir::Cache", d],
    ["Dir::Cache::archives", `${d}/archives`],
    ["Dir::Etc::SourceList", `${d}/etc/sources.list`],
    ["Dir::Etc::SourceParts", "/dev/null"],
    ["Dir::Etc::PreferencesParts", `${d}/etc/preferences.d`],
    ["Debug::NoLocking", "1"],
    ["APT::Sandbox::User", "root"],
  ].flatMap(([k, v]) => ["-o", `${k}=${v}`]).concat("-q");
  say(`fetching package lists for ${opts.suites.join(", ")} from the configured Debian mirror`);
  await run("apt-get", [...aptOpts, "update"], opts.manual);
  say(`downloading the ${opts.pkg} package`);
  const work = await Deno.makeTempDir({ prefix: "cotal-deb-" });
  try {
    await run("apt-get", [...aptOpts, "download", opts.pkg], opts.manual, work);
    const deb = [...Deno.readDirSync(work)].find((e) => e.name.endsWith(".deb"));
    if (!deb) {
      throw new CotalError("install_failed", `apt-get download left no .deb; ${opts.manual}.`);
    }
    say(`extracting ${deb.name}`);
    await run("dpkg-deb", ["-x", `${work}/${deb.name}`, `${work}/root`], opts.manual);
    const found = opts.inside.map((p) => `${work}/root/${p}`).find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    });
    if (!found) {
      throw new CotalError(
        "install_failed",
        `${deb.name} holds none of ${opts.inside.join(", ")}; ${opts.manual}.`,
      );
    }
    await Deno.mkdir(opts.target.replace(/\/[^/]+$/, ""), { recursive: true });
    // Copy then rename so a half-copied binary is never found by the next run.
    await Deno.copyFile(found, `${opts.target}.tmp`);
    await Deno.chmod(`${opts.target}.tmp`, 0o755);
    await Deno.rename(`${opts.target}.tmp`, opts.target);
    return opts.target;
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}
