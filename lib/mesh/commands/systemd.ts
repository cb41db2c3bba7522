/**
 * `cotal systemd print|install`: the units, sysusers and tmpfiles entries for a systemd host,
 * and the steps that enable them.
 *
 * @module
 */
import { writeFileAtomic } from "../../atomic_file.ts";
import { defineCommand, denoTaskCommand } from "../../cli/mod.ts";
import { CotalError } from "../../errors.ts";
import { registry } from "../../registry.ts";
import { assertValidSpaceName } from "../names.ts";
import { readSpaceIndex } from "../trust_state.ts";
import {
  defaultSystemdLayout,
  renderSysusers,
  renderTmpfiles,
  renderUnits,
  type SystemdLayout,
} from "../systemd.ts";
import { parsePort } from "./common.ts";
import { readMeshRecord } from "../stack.ts";
import { parseIdpUrl, readUserAuth } from "../user_auth.ts";
import {
  CONNECTION_EVICTOR_CREDS_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  spaceKeyHex,
} from "../../workspace/mod.ts";

const FLAGS = {
  "state-dir": {
    type: "string",
    default: "/var/lib/cotal",
    description: "the host's state directory",
  },
  "bin-dir": {
    type: "string",
    default: "/usr/local/bin",
    description: "where the compiled cotal-* binaries are installed",
  },
  "nats-server": {
    type: "string",
    default: "/usr/sbin/nats-server",
    description: "the nats-server binary",
  },
  port: {
    type: "string",
    description: "the broker's client port (default: the one --state-dir last ran on, else 4222)",
  },
  space: {
    type: "string",
    multiple: true,
    description: "a space to serve (default: the spaces under --state-dir)",
  },
  idp: {
    type: "string",
    description:
      "the IdP of user auth (default: the one --state-dir is pinned to; without either, no auth-service units)",
  },
  audience: { type: "string", description: "the IdP token audience (with --idp)" },
  "auth-listen": {
    type: "string",
    default: "127.0.0.1:4280",
    description: "the first space's auth-service address; each next space the next port",
  },
} as const;

async function layoutFrom(values: {
  "state-dir": string;
  "bin-dir": string;
  "nats-server": string;
  port?: string;
  space?: string[];
  idp?: string;
  audience?: string;
  "auth-listen": string;
}): Promise<SystemdLayout> {
  for (
    const [flag, v] of [["--state-dir", values["state-dir"]], ["--bin-dir", values["bin-dir"]], [
      "--nats-server",
      values["nats-server"],
    ]]
  ) {
    if (!v.startsWith("/")) {
      throw new CotalError("usage", `${flag} must be an absolute path, not '${v}'.`);
    }
  }
  const spaces = values.space?.length
    ? values.space.map(assertValidSpaceName)
    : (await readSpaceIndex(values["state-dir"])).spaces;
  if (spaces.length === 0) {
    throw new CotalError(
      "usage",
      `No spaces under ${values["state-dir"]}; name them with --space <name>.`,
    );
  }
  const pinned = values.idp === undefined
    ? await readUserAuth(values["state-dir"]).catch(() => undefined)
    : undefined;
  const idp = values.idp ?? pinned?.idp;
  const audience = values.audience ?? pinned?.audience;
  let userAuth: SystemdLayout["userAuth"];
  if (idp !== undefined) {
    parseIdpUrl(idp);
    const m = /^([^:\s]+):(\d+)$/.exec(values["auth-listen"]);
    if (!m) {
      throw new CotalError(
        "usage",
        `--auth-listen must be host:port (e.g. 127.0.0.1:4280), not '${values["auth-listen"]}'.`,
      );
    }
    const port = parsePort(m[2], "--auth-listen's port");
    if (port + spaces.length - 1 > 65535) {
      throw new CotalError(
        "usage",
        `--auth-listen needs ${spaces.length} fixed ports from ${port}; pick a port between 1 and ${
          65536 - spaces.length
        }.`,
      );
    }
    userAuth = { idp, ...(audience ? { audience } : {}), host: m[1], port };
  }
  return {
    ...defaultSystemdLayout(spaces),
    stateDir: values["state-dir"],
    binDir: values["bin-dir"],
    natsServer: values["nats-server"],
    // The port the state dir's broker last served on (a root brought up with --port), so the
    // units do not quietly point every daemon at another one.
    port: parsePort(
      values.port ?? String((await ownMeshRecord(values["state-dir"]))?.port ?? 4222),
    ),
    ...(userAuth ? { userAuth } : {}),
    sysCreds: await spacesWithSysCreds(values["state-dir"], spaces),
  };
}

/**
 * The spaces whose store dir holds both `$SYS` creds. A delivery unit that loaded a missing
 * file would not start, so only these get them.
 */
async function spacesWithSysCreds(stateDir: string, spaces: string[]): Promise<string[]> {
  const have: string[] = [];
  for (const space of spaces) {
    const dir = `${stateDir}/secrets/space.${spaceKeyHex(space)}`;
    const kinds = [MEMBERSHIP_OBSERVER_CREDS_KIND, CONNECTION_EVICTOR_CREDS_KIND];
    const found = await Promise.all(
      kinds.map((k) => Deno.lstat(`${dir}/${k}`).then((st) => st.isFile, () => false)),
    );
    if (found.every(Boolean)) have.push(space);
  }
  return have;
}

/**
 * One warning per space whose delivery unit starts without the `$SYS` creds, naming what stays
 * down and how to mint them.
 */
export function sysCredsWarnings(l: SystemdLayout): string[] {
  // The next step names the state dir: a root no 'cotal up' ever made has nothing to rotate
  // (newcomer pass 8 was told to run 'up --rotate-sys' before /var/lib/cotal existed).
  const root = l.stateDir;
  return l.spaces.filter((s) => !l.sysCreds?.includes(s)).map((s) =>
    `warning: space ${s} has no $SYS creds in ${root}/secrets (or they cannot be read): its delivery unit starts without them, so its membership view and connection evictions stay down; run 'cotal up --root ${root} --space ${s}' once if that root was never started (its first up mints them), else 'cotal down --root ${root} --keep-agents' and 'cotal up --root ${root}' (an up whose broker starts re-issues them); then install again.`
  );
}

/**
 * The state dir's mesh record, when this user wrote it: on a systemd host its run dir is shared
 * with the daemons' users, and a record one of them planted would aim every unit at its port.
 */
async function ownMeshRecord(stateDir: string) {
  const st = await Deno.lstat(`${stateDir}/run/mesh.json`).catch(() => undefined);
  const uid = Deno.uid();
  if (!st) return undefined;
  if (!st.isFile || (uid !== null && st.uid !== uid)) {
    console.error(
      `warning: ${stateDir}/run/mesh.json is not a file of this user; ignoring its port (pass --port).`,
    );
    return undefined;
  }
  return await readMeshRecord(stateDir).catch(() => undefined);
}

function allFiles(l: SystemdLayout): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, text] of Object.entries(renderUnits(l))) {
    out[`systemd/system/${name}`] = text;
  }
  out["sysusers.d/cotal.conf"] = renderSysusers(l.spaces);
  out["tmpfiles.d/cotal.conf"] = renderTmpfiles(l);
  return out;
}

/** What the operator runs after an install into `dest`, in order. */
export function nextSteps(dest: string, units: string[]): string[] {
  const where = dest === "/etc" ? "" : ` (after copying ${dest}/* into /etc)`;
  return [
    `next${where}, as root:`,
    "  systemd-sysusers /etc/sysusers.d/cotal.conf",
    "  systemd-tmpfiles --create /etc/tmpfiles.d/cotal.conf",
    "  systemctl daemon-reload",
    `  systemctl enable --now ${units.join(" ")}`,
    "  systemctl status 'cotal-*'",
  ];
}

/** `cotal systemd print`. */
export const systemdPrintCommand = defineCommand({
  kind: "command",
  name: "systemd print",
  summary: "print the systemd units, sysusers and tmpfiles entries for this host",
  flags: FLAGS,
  async run({ values }) {
    const layout = await layoutFrom(values);
    const files = allFiles(layout);
    for (const [name, text] of Object.entries(files)) console.log(`# ${name}\n${text}`);
    for (const w of sysCredsWarnings(layout)) console.error(w);
  },
});

/** `cotal systemd install`. */
export const systemdInstallCommand = defineCommand({
  kind: "command",
  name: "systemd install",
  summary:
    "write the units into <dest>/systemd/system (sysusers.d, tmpfiles.d beside it) and print every step to enable them",
  flags: {
    ...FLAGS,
    dest: {
      type: "string",
      default: "/etc",
      description: "the /etc to write into: systemd/system/, sysusers.d/ and tmpfiles.d/ under it",
    },
  },
  async run({ values }) {
    const layout = await layoutFrom(values);
    const files = allFiles(layout);
    for (const [name, text] of Object.entries(files)) {
      const path = `${values.dest}/${name}`;
      await Deno.mkdir(path.replace(/\/[^/]+$/, ""), { recursive: true });
      await writeFileAtomic(path, text, { mode: 0o644, what: "The unit file" });
      console.log(`wrote ${path}`);
    }
    const units = Object.keys(files).filter((f) => f.startsWith("systemd/system/"))
      .map((f) => f.slice("systemd/system/".length))
      // The restart oneshot runs only when its path unit fires.
      .filter((u) => !u.startsWith("cotal-delivery-restart-"));
    const missing = await missingPrograms(values, layout.userAuth !== undefined);
    for (const w of [...hiddenPaths(values), ...missing, ...sysCredsWarnings(layout)]) {
      console.error(w);
    }
    console.log(nextSteps(values.dest, units).join("\n"));
  },
});

/**
 * Programs the units would start that are not there (or not executable): each unit would fail
 * at start with only systemd's "Failed at step EXEC". One warning each, naming how to get it.
 */
export async function missingPrograms(
  values: { "nats-server": string; "bin-dir": string },
  userAuth: boolean,
): Promise<string[]> {
  const programs = ["cotal-delivery", "cotal-signer", "cotal-supervise"];
  if (userAuth) programs.push("cotal-auth-service");
  const wanted: [string, string, string][] = [
    [
      values["nats-server"],
      "--nats-server",
      "install nats-server 2.10 or newer there, or pass the one 'cotal up' fetched into .cache/",
    ],
    ...programs.map((p): [string, string, string] => [
      `${values["bin-dir"]}/${p}`,
      "--bin-dir",
      `build the binaries with '${denoTaskCommand("compile")}' and copy them there`,
    ]),
  ];
  const out: string[] = [];
  for (const [path, flag, fix] of wanted) {
    const st = await Deno.stat(path).catch(() => undefined);
    if (st?.isFile && ((st.mode ?? 0o111) & 0o111)) continue;
    out.push(`warning: ${path} (${flag}) is not an executable file; ${fix}.`);
  }
  return out;
}

/**
 * Programs (or the state dir) the units would use from where they cannot see them: ProtectHome=
 * and PrivateTmp= hide /home, /root, /run/user and /tmp from every Cotal unit (a project cache
 * is often there).
 */
export function hiddenPaths(
  values: { "nats-server": string; "bin-dir": string; "state-dir"?: string },
): string[] {
  const hidden = /^\/(home|root|run\/user|tmp|var\/tmp)(\/|$)/;
  return [
    ["--nats-server", values["nats-server"]],
    ["--bin-dir", values["bin-dir"]],
    ["--state-dir", values["state-dir"] ?? ""],
  ]
    .filter(([, path]) => hidden.test(path))
    .map(([flag, path]) =>
      `warning: ${flag} ${path} is under a directory the units cannot see (ProtectHome=, PrivateTmp=); ${
        flag === "--state-dir"
          ? "use a state dir outside them, such as /var/lib/cotal."
          : flag === "--bin-dir"
          ? "put the binaries under /usr/local (the default --bin-dir is /usr/local/bin)."
          : "copy it to /usr/local (e.g. /usr/local/sbin/nats-server) and pass that."
      }`
    );
}

registry.register([systemdPrintCommand, systemdInstallCommand]);
