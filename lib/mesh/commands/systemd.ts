import { writeFileAtomic } from "../atomic_file.ts";
import { defineCommand } from "../../cli/mod.ts";
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
  port: { type: "string", default: "4222", description: "the broker's client port" },
  space: {
    type: "string",
    multiple: true,
    description: "a space to serve (repeatable; default: the spaces under --state-dir)",
  },
} as const;

async function layoutFrom(values: {
  "state-dir": string;
  "bin-dir": string;
  "nats-server": string;
  port: string;
  space?: string[];
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
  return {
    ...defaultSystemdLayout(spaces),
    stateDir: values["state-dir"],
    binDir: values["bin-dir"],
    natsServer: values["nats-server"],
    port: parsePort(values.port),
  };
}

function allFiles(l: SystemdLayout): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, text] of Object.entries(renderUnits(l))) out[`systemd/${name}`] = text;
  out["sysusers.d/cotal.conf"] = renderSysusers();
  out["tmpfiles.d/cotal.conf"] = renderTmpfiles(l);
  return out;
}

/** `cotal systemd print`. */
export const systemdPrintCommand = defineCommand({
  kind: "command",
  name: "systemd print",
  summary: "print the systemd units, sysusers and tmpfiles entries for this host",
  flags: FLAGS,
  async run({ values }) {
    const files = allFiles(await layoutFrom(values));
    for (const [name, text] of Object.entries(files)) console.log(`# ${name}\n${text}`);
  },
});

/** `cotal systemd install`. */
export const systemdInstallCommand = defineCommand({
  kind: "command",
  name: "systemd install",
  summary: "write the units into /etc (or --dest) and say how to enable them",
  flags: {
    ...FLAGS,
    dest: {
      type: "string",
      default: "/etc",
      description: "where systemd/, sysusers.d/ and tmpfiles.d/ live",
    },
  },
  async run({ values }) {
    const files = allFiles(await layoutFrom(values));
    for (const [name, text] of Object.entries(files)) {
      const path = `${values.dest}/${name}`;
      await Deno.mkdir(path.replace(/\/[^/]+$/, ""), { recursive: true });
      await writeFileAtomic(path, text, { mode: 0o644, what: "The unit file" });
      console.log(`wrote ${path}`);
    }
    console.log(
      "next: systemd-sysusers && systemd-tmpfiles --create && systemctl daemon-reload && " +
        "systemctl enable --now cotal-nats.service",
    );
  },
});

registry.register([systemdPrintCommand, systemdInstallCommand]);
