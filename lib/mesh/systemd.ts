/**
 * systemd units for a Cotal host: the broker and each daemon, run from the compiled binaries,
 * each under its own user with the filesystem locked down. The signer records
 * (`secrets/auth`) belong to the `cotal-signer` user, mode 0700, and are made inaccessible to
 * every other unit, the supervisor's included: the supervisor signs through its space's
 * `cotal-signer`, so a compromised supervisor cannot reach the seeds even through libc (its
 * FFI), which Deno's permissions do not check.
 *
 * Secrets cross users without loosening their 0600 modes: systemd's `LoadCredential=` reads
 * the delivery cred as root and hands the daemon a private copy; a `.path` unit restarts
 * delivery when the signer re-signs that cred. Each space's supervisor runs as a user of its own
 * ({@linkcode superviseUser}), and so do the agents it starts; it shares its space's store dir with
 * the signer through the space's own group ({@linkcode spaceStoreGroup}; the dir is root's,
 * setgid and sticky, 3770): each reads, replaces and removes only the files it owns, and no
 * supervisor reaches another space's dir, agents or sockets.
 */
import { managerInstanceId } from "../manager/mod.ts";
import {
  CONNECTION_EVICTOR_CREDS_KIND,
  DELIVERY_CREDS_KIND,
  MEMBERSHIP_CONFIG_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  MEMBERSHIP_RW_CREDS_KIND,
  spaceKeyHex,
} from "../workspace/mod.ts";

/** The daemon creds the signer re-signs in a space's dir, so they are its files. */
const DAEMON_CRED_FILES: readonly string[] = [DELIVERY_CREDS_KIND, MEMBERSHIP_RW_CREDS_KIND];
/**
 * The `$SYS` creds in a space's dir (they can kick any connection on the server, the signer's
 * included): root's, so neither the supervisor nor the signer reads them.
 */
const SYS_CRED_FILES: readonly string[] = [
  CONNECTION_EVICTOR_CREDS_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
];

/** Where things live on a systemd host. */
export interface SystemdLayout {
  /** State: `/var/lib/cotal`. */
  stateDir: string;
  /** The compiled binaries (`cotal-delivery`, ...): `/usr/local/bin`. */
  binDir: string;
  /** nats-server: `/usr/sbin/nats-server` (Debian's). */
  natsServer: string;
  /** The broker's client address. */
  host: string;
  port: number;
  /** The spaces this host serves. */
  spaces: string[];
  /**
   * User auth (IdP-token exchange) when the root has it: the IdP, its audience, and the first
   * space's auth-service listen address (the next spaces listen on the following ports).
   */
  userAuth?: { idp: string; audience?: string; host: string; port: number };
  /**
   * The spaces whose `$SYS` creds (membership observer, connection evictor) the store holds:
   * their delivery units load them. A unit whose `LoadCredential=` names a missing file does not
   * start, so a space not listed runs with its membership view and evictions down.
   */
  sysCreds?: readonly string[];
}

/**
 * The users units run as, one per daemon, sharing nothing but the `cotal` group; each space's
 * supervisor has its own ({@linkcode superviseUser}).
 */
export const UNIT_USERS = Object.freeze({
  broker: "cotal-nats",
  delivery: "cotal-delivery",
  auth: "cotal-auth",
  signer: "cotal-signer",
});

/**
 * The group that may pass through the store's root: every space's supervisor and the signer. A
 * space's dir is its own group's ({@linkcode spaceStoreGroup}).
 */
export const STORE_GROUP = "cotal-store";

/** A space's short id in the names of its user and group (a user name has at most 31 bytes). */
function spaceId(space: string): string {
  return spaceKeyHex(space).slice(0, 12);
}

/**
 * The user a space's supervisor runs as: its own, and the agents it starts run as its uid too.
 * With one user for every space's supervisor, a compromised one (or an agent out of its sandbox)
 * could read and replace another space's supervisor cred, agent creds and agents' dirs.
 */
export function superviseUser(space: string): string {
  return `cotal-sv-${spaceId(space)}`;
}

/**
 * The group of a space's store dir, whose members are that space's supervisor and the signer:
 * both write the dir (agent creds; the re-signed daemon creds), neither reads the other's files.
 */
export function spaceStoreGroup(space: string): string {
  return `cotal-st-${spaceId(space)}`;
}

/** Kernel knobs, modules, logs, cgroups, clock, hostname and others' processes: every unit. */
const PROTECT_KERNEL_AND_HOST: readonly string[] = Object.freeze([
  "ProtectKernelTunables=yes",
  "ProtectKernelModules=yes",
  "ProtectKernelLogs=yes",
  "ProtectControlGroups=yes",
  "ProtectClock=yes",
  "ProtectHostname=yes",
  "ProtectProc=invisible",
]);

/** A oneshot that only asks systemd to act: root (to reach systemd's socket) and nothing more. */
const ONESHOT_LOCKDOWN: readonly string[] = Object.freeze([
  "NoNewPrivileges=yes",
  "CapabilityBoundingSet=",
  "ProtectSystem=strict",
  "ProtectHome=yes",
  "PrivateTmp=yes",
  "PrivateDevices=yes",
  "PrivateNetwork=yes",
  "PrivateMounts=yes",
  "IPAddressDeny=any",
  ...PROTECT_KERNEL_AND_HOST,
  "ProcSubset=pid",
  "RestrictAddressFamilies=AF_UNIX",
  "RestrictNamespaces=yes",
  "RestrictSUIDSGID=yes",
  "RestrictRealtime=yes",
  "LockPersonality=yes",
  "MemoryDenyWriteExecute=yes",
  "SystemCallArchitectures=native",
  "SystemCallFilter=@system-service",
  "SystemCallFilter=~@privileged @resources",
  "SystemCallErrorNumber=EPERM",
  "UMask=0077",
]);

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

/** Defaults for a standard host. */
export function defaultSystemdLayout(spaces: string[]): SystemdLayout {
  return {
    stateDir: "/var/lib/cotal",
    binDir: "/usr/local/bin",
    natsServer: "/usr/sbin/nats-server",
    host: "127.0.0.1",
    port: 4222,
    spaces,
  };
}

function unit(sections: Record<string, (string | false)[]>): string {
  return Object.entries(sections).map(([name, lines]) =>
    `[${name}]\n${lines.filter((l) => l !== false).join("\n")}\n`
  ).join("\n");
}

/** What a unit's process needs beyond the common lockdown; each need is named where it is used. */
interface UnitNeeds {
  /** It runs V8 (a Deno binary), whose JIT writes executable memory. */
  jit?: boolean;
  /** It makes the agents' sandboxes (bwrap): user, PID, mount, network, IPC, UTS namespaces. */
  sandboxes?: boolean;
  /** Socket families beyond loopback TCP and unix sockets. */
  families?: string[];
  /** It only ever talks to the broker, and the broker is on loopback. */
  loopbackOnly?: boolean;
}

// Directives every Cotal unit carries: no capabilities, no new privileges, a read-only OS with
// no homes, devices, kernel knobs, clock or hostname, native system calls of a service only.
function hardening(needs: UnitNeeds = {}): string[] {
  return [
    "NoNewPrivileges=yes",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "PrivateMounts=yes",
    ...PROTECT_KERNEL_AND_HOST,
    "RestrictSUIDSGID=yes",
    "RestrictRealtime=yes",
    "LockPersonality=yes",
    "RemoveIPC=yes",
    "SystemCallArchitectures=native",
    "SystemCallErrorNumber=EPERM",
    `RestrictAddressFamilies=${
      ["AF_UNIX", "AF_INET", "AF_INET6", ...(needs.families ?? [])].join(" ")
    }`,
    ...(needs.sandboxes
      // Exception: bwrap makes each agent's namespaces and mounts, pivots into them and installs
      // the agent's own seccomp filter, and the supervisor sets each agent's rlimits, so neither
      // RestrictNamespaces= nor the service allowlist fits it: only what no sandbox needs is denied.
      ? ["SystemCallFilter=~@clock @cpu-emulation @debug @module @obsolete @raw-io @reboot @swap"]
      : [
        "RestrictNamespaces=yes",
        "SystemCallFilter=@system-service",
        "SystemCallFilter=~@privileged",
      ]),
    // A daemon that only talks to a loopback broker reaches nothing else.
    ...(needs.loopbackOnly ? ["IPAddressDeny=any", "IPAddressAllow=localhost"] : []),
    // Exception for Deno binaries: V8's JIT needs writable, executable memory.
    ...(needs.jit ? [] : ["MemoryDenyWriteExecute=yes"]),
    "UMask=0077",
    "Restart=on-failure",
    "RestartSec=2s",
  ];
}

/** Renders every unit file, keyed by file name. */
export function renderUnits(l: SystemdLayout): Record<string, string> {
  const units: Record<string, string> = {};
  brokerUnit(l, units);
  for (const [i, space] of l.spaces.entries()) {
    deliveryUnits(l, space, units);
    signerUnit(l, space, units);
    superviseUnit(l, space, i, units);
    if (l.userAuth) authServiceUnit(l, space, i, units);
  }
  return units;
}

/** What each space's units share: the state dir, the broker's URL and the space's store dir. */
function where(l: SystemdLayout, space: string) {
  const S = l.stateDir;
  const hex = spaceKeyHex(space);
  return { S, url: `nats://${l.host}:${l.port}`, hex, spaceStore: `${S}/secrets/space.${hex}` };
}

/** The broker. */
function brokerUnit(l: SystemdLayout, units: Record<string, string>): void {
  const S = l.stateDir;
  units["cotal-nats.service"] = unit({
    Unit: [
      "Description=Cotal broker (nats-server, operator mode)",
      "After=network.target",
    ],
    Service: [
      `User=${UNIT_USERS.broker}`,
      "Group=cotal",
      `ExecStart=${l.natsServer} -c ${S}/broker/nats.conf`,
      "ExecReload=/bin/kill -HUP $MAINPID",
      `ReadWritePaths=${S}/broker`,
      `InaccessiblePaths=${S}/secrets`,
      // Twice the config's connection cap (BROKER_MAX_CONNECTIONS): the rest is JetStream's.
      "LimitNOFILE=16384",
      ...hardening(),
    ],
    Install: ["WantedBy=multi-user.target"],
  });
}

/** The creds a space's delivery unit loads, by kind (the file names in its store dir). */
export function deliveryCredKinds(l: SystemdLayout, space: string): string[] {
  const kinds = [DELIVERY_CREDS_KIND, MEMBERSHIP_RW_CREDS_KIND, MEMBERSHIP_CONFIG_KIND];
  if (l.sysCreds?.includes(space)) {
    kinds.push(MEMBERSHIP_OBSERVER_CREDS_KIND, CONNECTION_EVICTOR_CREDS_KIND);
  }
  return kinds;
}

/** A space's delivery daemon, and the path unit that restarts it onto a re-signed cred. */
function deliveryUnits(l: SystemdLayout, space: string, units: Record<string, string>): void {
  const { S, url, hex, spaceStore } = where(l, space);
  units[`cotal-delivery-${space}.service`] = unit({
    Unit: [
      `Description=Cotal delivery daemon for space ${space}`,
      "After=cotal-nats.service",
      "Requires=cotal-nats.service",
    ],
    Service: [
      `User=${UNIT_USERS.delivery}`,
      "Group=cotal",
      // Its creds, loaded by systemd (the store stays hidden from it): its own, the membership
      // feed's, and the $SYS pair (the membership view, evictions) when the store has them.
      ...deliveryCredKinds(l, space).map((k) => `LoadCredential=${k}:${spaceStore}/${k}`),
      `ExecStart=${l.binDir}/cotal-delivery --space ${space} --server ${url} --creds-dir \${CREDENTIALS_DIRECTORY} --lock-file ${S}/run/delivery/space.${hex}.lock --lease-wait 40`,
      `InaccessiblePaths=${S}/secrets`,
      `ReadWritePaths=${S}/logs ${S}/run/delivery`,
      ...hardening({ jit: true, loopbackOnly: isLoopback(l.host) }),
    ],
    Install: ["WantedBy=multi-user.target"],
  });
  // The signer re-signs the delivery cred at 75% of its life; delivery restarts onto it.
  units[`cotal-delivery-${space}.path`] = unit({
    Unit: [`Description=Restart Cotal delivery for ${space} when its cred is re-signed`],
    Path: [
      `PathChanged=${spaceStore}/delivery.creds`,
      `PathChanged=${spaceStore}/membership-rw.creds`,
      `Unit=cotal-delivery-restart-${space}.service`,
    ],
    Install: ["WantedBy=multi-user.target"],
  });
  units[`cotal-delivery-restart-${space}.service`] = unit({
    Unit: [`Description=Restart Cotal delivery for ${space} onto its re-signed cred`],
    Service: [
      "Type=oneshot",
      `ExecStart=/bin/systemctl try-restart cotal-delivery-${space}.service`,
      // It only asks systemd, over its unix socket, to restart one unit: nothing else.
      ...ONESHOT_LOCKDOWN,
    ],
  });
}

/** A space's signer: the only holder of its signing seeds. */
function signerUnit(l: SystemdLayout, space: string, units: Record<string, string>): void {
  const { S, url, spaceStore } = where(l, space);
  units[`cotal-signer-${space}.service`] = unit({
    Unit: [
      `Description=Cotal signer for space ${space} (the only holder of its signing seeds)`,
      "After=cotal-nats.service",
      "Requires=cotal-nats.service",
      `Before=cotal-supervise-${space}.service`,
    ],
    Service: [
      `User=${UNIT_USERS.signer}`,
      "Group=cotal",
      `SupplementaryGroups=${STORE_GROUP} ${spaceStoreGroup(space)}`,
      `ExecStart=${l.binDir}/cotal-signer --root ${S} --space ${space} --server ${url}`,
      // Writes: its audit trail and the daemon creds it re-signs in its own space's dir.
      `ReadWritePaths=${S}/audit ${spaceStore}`,
      `InaccessiblePaths=${S}/broker ${S}/auth-service ${S}/run`,
      ...hardening({ jit: true, loopbackOnly: isLoopback(l.host) }),
    ],
    Install: ["WantedBy=multi-user.target"],
  });
}

/** A space's supervisor, as its own user. */
function superviseUnit(
  l: SystemdLayout,
  space: string,
  i: number,
  units: Record<string, string>,
): void {
  const { S, url } = where(l, space);
  // User mode: its agents' bearers come from the space's auth service.
  const auth = l.userAuth ? `${l.userAuth.host}:${l.userAuth.port + i}` : undefined;
  units[`cotal-supervise-${space}.service`] = unit({
    Unit: [
      `Description=Cotal supervisor for space ${space} (agent lifecycle)`,
      "After=cotal-nats.service",
      "Requires=cotal-nats.service",
      // It signs every credential through the signer; without it, spawns wait and say so.
      `Wants=cotal-signer-${space}.service`,
      `After=cotal-signer-${space}.service`,
      ...(auth
        ? [`Wants=cotal-auth-service-${space}.service`, `After=cotal-auth-service-${space}.service`]
        : []),
    ],
    Service: [
      `User=${superviseUser(space)}`,
      "Group=cotal",
      `SupplementaryGroups=${STORE_GROUP} ${spaceStoreGroup(space)}`,
      `ExecStart=${l.binDir}/cotal-supervise --root ${S} --space ${space} --server ${url} --signer remote${
        auth ? ` --auth-service http://${auth}` : ""
      }`,
      `ReadWritePaths=${S}`,
      // No seed in its mount namespace at all, and no audit trail to rewrite.
      `InaccessiblePaths=${S}/secrets/auth ${S}/audit`,
      // Agents it starts are sandboxed by bwrap on top, which needs netlink to bring up each
      // agent's loopback in its own network namespace.
      ...hardening({ jit: true, sandboxes: true, families: ["AF_NETLINK"] }),
    ],
    Install: ["WantedBy=multi-user.target"],
  });
}

/** A space's auth service (user auth only), on the `i`th port after the first. */
function authServiceUnit(
  l: SystemdLayout,
  space: string,
  i: number,
  units: Record<string, string>,
): void {
  const userAuth = l.userAuth!;
  const { S, url } = where(l, space);
  const listen = `${userAuth.host}:${userAuth.port + i}`;
  units[`cotal-auth-service-${space}.service`] = unit({
    Unit: [
      `Description=Cotal auth service for space ${space} (callout, exchange, JWKS on ${listen})`,
      "After=cotal-nats.service",
      "Requires=cotal-nats.service",
    ],
    Service: [
      `User=${UNIT_USERS.auth}`,
      "Group=cotal",
      // Its own root: the store holds its kinds and a stripped data-signer projection that
      // 'cotal systemd install' places there, so the supervisor's store stays out of reach.
      `ExecStart=${l.binDir}/cotal-auth-service --root ${S}/auth-service --space ${space} --server ${url} --listen ${listen} --idp ${userAuth.idp}${
        userAuth.audience ? ` --audience ${userAuth.audience}` : ""
      }`,
      `InaccessiblePaths=${S}/secrets`,
      `ReadWritePaths=${S}/auth-service`,
      ...hardening({ jit: true }),
    ],
    Install: ["WantedBy=multi-user.target"],
  });
}

/**
 * sysusers.d entries creating the users and groups: the shared daemons', then each space's
 * supervisor and its store group.
 */
export function renderSysusers(spaces: readonly string[]): string {
  return [
    "g cotal -",
    `g ${STORE_GROUP} -`,
    ...Object.values(UNIT_USERS).map((u) => `u ${u} -:cotal "Cotal ${u.slice(6)}" -`),
    `m ${UNIT_USERS.signer} ${STORE_GROUP}`,
    ...spaces.flatMap((space) => [
      `g ${spaceStoreGroup(space)} -`,
      `u ${superviseUser(space)} -:cotal "Cotal supervisor of space ${space}" -`,
      `m ${superviseUser(space)} ${STORE_GROUP}`,
      `m ${superviseUser(space)} ${spaceStoreGroup(space)}`,
      `m ${UNIT_USERS.signer} ${spaceStoreGroup(space)}`,
    ]),
    "",
  ].join("\n");
}

/** tmpfiles.d entries laying out the state directory with its owners and modes. */
export function renderTmpfiles(l: SystemdLayout): string {
  const S = l.stateDir;
  return [
    `d ${S} 0750 root cotal -`,
    `d ${S}/broker 0700 ${UNIT_USERS.broker} cotal -`,
    // The store is root's: the supervisor and the signer (the cotal-store group) may pass
    // through it to their space's dir, the signer to its records. Each space's dir is shared,
    // sticky: either may add files, and none may remove or replace a file it does not own.
    // The daemon creds exist (empty until provisioned) so no other user can plant a link under
    // their names (systemd reads delivery's as root). `Z`, `z` and `f` give what an install as
    // root provisioned to its owner.
    `d ${S}/secrets 2710 root ${STORE_GROUP} -`,
    `d ${S}/secrets/auth 0700 ${UNIT_USERS.signer} ${STORE_GROUP} -`,
    `Z ${S}/secrets/auth - ${UNIT_USERS.signer} ${STORE_GROUP} -`,
    // Shared dirs are sticky: a daemon removes or replaces only what it made (a supervisor
    // cannot take another's holder lock, nor a daemon another's log).
    `d ${S}/run 1770 root cotal -`,
    `d ${S}/run/delivery 0700 ${UNIT_USERS.delivery} cotal -`,
    `d ${S}/run/sockets 0710 root cotal -`,
    `d ${S}/agents 0710 root cotal -`,
    ...l.spaces.flatMap((space) => spaceTmpfiles(S, space)),
    `d ${S}/audit 0700 ${UNIT_USERS.signer} ${STORE_GROUP} -`,
    `d ${S}/auth-service 0700 ${UNIT_USERS.auth} cotal -`,
    `d ${S}/logs 1770 root cotal -`,
    "",
  ].join("\n");
}

/**
 * One space's part of the layout: its store dir (its group's), and the agents' and sockets' dirs
 * its supervisor would make, made beforehand as that supervisor's alone.
 */
function spaceTmpfiles(S: string, space: string): string[] {
  const dir = `${S}/secrets/space.${spaceKeyHex(space)}`;
  const group = spaceStoreGroup(space);
  const sup = superviseUser(space);
  // What `agentDirOf` and `agentSocketDir` name for this root and space.
  const instance = managerInstanceId(S, space);
  const sockets = `${S}/run/sockets/${instance.slice(0, 12)}`;
  const lock = `${S}/run/manager.${instance}.lock`;
  return [
    `d ${dir} 3770 root ${group} -`,
    // What the supervisor keeps there (its roster, its agents' creds) is its own.
    ...["manager.*.agents.json", "agent.*.creds"].map((f) => `z ${dir}/${f} - ${sup} ${group} -`),
    `Z ${dir}/agents - ${sup} ${group} -`,
    // Its own cred is the signer's to re-sign (it holds no seed to renew it after a long stop)
    // and the supervisor's to read, as a member of the space's group.
    `f ${dir}/supervisor.creds 0640 ${UNIT_USERS.signer} ${group} -`,
    `z ${dir}/supervisor.creds 0640 ${UNIT_USERS.signer} ${group} -`,
    ...DAEMON_CRED_FILES.map((f) => `f ${dir}/${f} 0600 ${UNIT_USERS.signer} ${group} -`),
    ...SYS_CRED_FILES.map((f) => `z ${dir}/${f} 0600 root root -`),
    `d ${S}/agents/space.${spaceKeyHex(space)} 0700 ${sup} cotal -`,
    `d ${sockets} 0700 ${sup} cotal -`,
    // Its holder lock exists, its own, before another space's supervisor could plant a link or
    // a file of its own under the name (red team 19: one truncated the other's roster through
    // it, or kept it from starting).
    `f ${lock} 0600 ${sup} cotal -`,
    `z ${lock} 0600 ${sup} cotal -`,
  ];
}
