/**
 * Red team 19b's fake systemd host: systemd-sysusers and systemd-tmpfiles (offline, `--root`)
 * lay out /var/lib/cotal for two spaces (alpha, beta) as an install as root provisioned it; then
 * each unit's user runs commands through setpriv with the groups systemd gives it (its
 * /etc/group memberships plus the unit's SupplementaryGroups=, which are the same here).
 */
import {
  defaultSystemdLayout,
  renderSysusers,
  renderTmpfiles,
  superviseUser,
  UNIT_USERS,
} from "../../lib/mesh/systemd.ts";
import { managerInstanceId } from "../../lib/manager/manager_types.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

export const S = "/var/lib/cotal";
export const SPACES = ["alpha", "beta"];
const TOOLS = ["/usr/bin/systemd-sysusers", "/usr/bin/systemd-tmpfiles", "/usr/bin/setpriv"];
const missing = TOOLS.filter((t) => {
  try {
    return !Deno.statSync(t).isFile;
  } catch {
    return true;
  }
});
/** Appended to a test's name; non-empty means skip. */
export const why = Deno.uid() !== 0
  ? " (skipped: switching users needs root)"
  : missing.length
  ? ` (skipped: ${missing.join(", ")} not installed here)`
  : "";

const LIB = new URL("../../lib/", import.meta.url).pathname;

export interface Ran {
  code: number;
  out: string;
  err: string;
}

export interface FakeHost {
  fake: string;
  /** The state dir inside the fake root. */
  R: string;
  users: Map<string, number>;
  groups: Map<string, number>;
  groupText: string;
  /** `secrets/space.<hex>` of a space (relative to R). */
  spaceDir(space: string): string;
  /** The supervisor's instance id under the real state dir. */
  instance(space: string): string;
  sup(space: string): string;
  /** Runs `bash -c script` as a unit's user (cwd R); `$R` is the state dir. */
  sh(user: string, script: string): Promise<Ran>;
  /** Runs a Deno program (text) as a unit's user, with the repo's lib/ beside it. */
  deno(user: string, program: string, args?: string[]): Promise<Ran>;
  /** Re-runs `systemd-tmpfiles --create` as root (what every boot does). */
  tmpfiles(): Promise<Ran>;
  close(): Promise<void>;
}

export function memberships(text: string, user: string): number[] {
  return text.split("\n").filter(Boolean).map((l) => l.split(":"))
    .filter((f) => (f[3] ?? "").split(",").includes(user)).map((f) => Number(f[2]));
}

function ids(text: string): Map<string, number> {
  return new Map(
    text.split("\n").filter(Boolean).map((l) => {
      const f = l.split(":");
      return [f[0], Number(f[2])];
    }),
  );
}

export async function run(cmd: string, args: string[], env?: Record<string, string>): Promise<Ran> {
  const out = await new Deno.Command(cmd, {
    args,
    stdout: "piped",
    stderr: "piped",
    ...(env ? { env, clearEnv: true } : {}),
  }).output();
  return {
    code: out.code,
    out: new TextDecoder().decode(out.stdout),
    err: new TextDecoder().decode(out.stderr),
  };
}

async function must(cmd: string, args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.err}`);
  return r.out;
}

/** Lays out the fake host; `provisioned` files are written root's, 0600, before tmpfiles. */
export async function fakeHost(opts: { meshRecord?: boolean } = {}): Promise<FakeHost> {
  const fake = await tempDir("cotal-rt19b-");
  await Deno.chmod(fake, 0o755);
  const R = `${fake}${S}`;
  const spaceDir = (sp: string) => `secrets/space.${spaceKeyHex(sp)}`;
  await Deno.mkdir(`${fake}/etc`, { recursive: true });
  await Deno.writeTextFile(`${fake}/etc/passwd`, "");
  await Deno.writeTextFile(`${fake}/etc/group`, "");
  await Deno.mkdir(`${R}/secrets/auth`, { recursive: true });
  for (const sp of SPACES) await Deno.mkdir(`${R}/${spaceDir(sp)}`, { recursive: true });
  const provisioned: Record<string, string> = {
    "secrets/auth/broker.json": "SIGNER-SEED-MARKER",
  };
  for (const sp of SPACES) {
    provisioned[`${spaceDir(sp)}/delivery.creds`] = `${sp.toUpperCase()}-DELIVERY-MARKER`;
    provisioned[`${spaceDir(sp)}/supervisor.creds`] = `${sp.toUpperCase()}-SUPERVISOR-MARKER`;
    provisioned[`${spaceDir(sp)}/connection-evictor.creds`] = `${sp.toUpperCase()}-SYS-MARKER`;
  }
  if (opts.meshRecord) {
    // What `cotal up --root /var/lib/cotal` then `cotal down` leaves (README's systemd steps).
    await Deno.mkdir(`${R}/run`, { recursive: true });
    provisioned["run/mesh.json"] = JSON.stringify({
      root: S,
      url: "nats://127.0.0.1:4222",
      host: "127.0.0.1",
      port: 4222,
    });
  }
  for (const [f, v] of Object.entries(provisioned)) {
    await Deno.writeTextFile(`${R}/${f}`, v, { mode: 0o600 });
  }
  await Deno.writeTextFile(`${fake}/sysusers.conf`, renderSysusers(SPACES));
  await Deno.writeTextFile(`${fake}/tmpfiles.conf`, renderTmpfiles(defaultSystemdLayout(SPACES)));
  await must("systemd-sysusers", [`--root=${fake}`, `${fake}/sysusers.conf`]);
  const tmpfiles = () =>
    run("systemd-tmpfiles", [`--root=${fake}`, "--create", `${fake}/tmpfiles.conf`]);
  const first = await tmpfiles();
  if (first.code !== 0) throw new Error(`tmpfiles: ${first.err}`);
  const users = ids(await Deno.readTextFile(`${fake}/etc/passwd`));
  const groupText = await Deno.readTextFile(`${fake}/etc/group`);
  const groups = ids(groupText);
  // The signer's trail.
  await Deno.writeTextFile(`${R}/audit/signer.jsonl`, "AUDIT\n", { mode: 0o600 });
  await Deno.chown(`${R}/audit/signer.jsonl`, users.get(UNIT_USERS.signer)!, null);

  const tools = `${fake}/tools`;
  await Deno.mkdir(tools);
  await Deno.copyFile(Deno.execPath(), `${tools}/deno`);
  await Deno.chmod(`${tools}/deno`, 0o755);
  await must("cp", ["-r", LIB, `${tools}/lib`]);
  await must("chmod", ["-R", "a+rX", tools]);

  const setpriv = async (user: string, argv: string[], extraEnv: Record<string, string> = {}) => {
    const uid = users.get(user);
    if (uid === undefined) throw new Error(`no user ${user}`);
    const home = `${fake}/home-${user}`;
    await Deno.mkdir(home, { recursive: true });
    await Deno.chown(home, uid, groups.get("cotal")!);
    const supp = memberships(groupText, user);
    const suppFlag = supp.length ? `--groups=${supp.join(",")}` : "--clear-groups";
    return await run("setpriv", [
      `--reuid=${uid}`,
      `--regid=${groups.get("cotal")}`,
      suppFlag,
      ...argv,
    ], {
      PATH: "/usr/bin:/bin:/usr/sbin:/sbin",
      HOME: home,
      DENO_DIR: `${home}/deno`,
      NO_COLOR: "1",
      R,
      ...extraEnv,
    });
  };
  let n = 0;
  return {
    fake,
    R,
    users,
    groups,
    groupText,
    spaceDir,
    instance: (sp) => managerInstanceId(S, sp),
    sup: superviseUser,
    sh: (user, script) => setpriv(user, ["bash", "-c", `cd "$R" && ${script}`]),
    async deno(user, program, args = []) {
      const file = `${tools}/prog${n++}.ts`;
      await Deno.writeTextFile(file, program);
      await Deno.chmod(file, 0o644);
      return await setpriv(user, [
        `${tools}/deno`,
        "run",
        "-A",
        "--no-config",
        file,
        ...args,
      ]);
    },
    tmpfiles,
    close: () => removeTempDir(fake),
  };
}
