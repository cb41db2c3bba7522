/**
 * Landlock scoping for a sandboxed agent: every process in its sandbox may neither connect nor
 * send to an abstract unix socket made outside it, nor signal a process outside it.
 *
 * Abstract unix sockets (`@name`) live in a network namespace, not on a filesystem, so the mount
 * allowlist cannot hide them. An agent on its own network (the default) cannot see the host's;
 * an agent on the host's network (`--net host`) shares the host's namespace and, without this,
 * could dial any abstract socket a host service listens on (a desktop bus, an X server, a
 * container runtime's shim). Landlock's scopes (Linux 6.12, Landlock ABI 6) refuse that to a
 * process and its descendants; sockets made inside the sandbox keep working.
 *
 * The scope is taken by the first program bwrap runs, before the limits and the uid drop:
 * Landlock restricts only the calling process, and Deno has no call for it. That program is
 * Perl (`perl-base`, which every Debian system has), whose `syscall` reaches the two calls;
 * the script is fixed here and takes no input but the command it then runs.
 *
 * @module
 */
import { landlockAbiVersion } from "./libc.ts";

/** The Landlock ABI that has scopes (Linux 6.12). */
export const LANDLOCK_SCOPE_ABI = 6;
/** The interpreter that takes the scope, then runs the rest of the chain. */
export const SCOPE_INTERPRETER = "/usr/bin/perl";

/** `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL`. */
const SCOPES = 3;

// landlock_create_ruleset (444) and landlock_restrict_self (446) have one number on every
// architecture. The ruleset handles no file or network access (the mounts and the cgroup do
// that) and only the two scopes; bwrap has already set no_new_privs, which Landlock requires.
const SCRIPT = [
  `my $attr = pack("QQQ", 0, 0, ${SCOPES});`,
  `my $fd = syscall(444, $attr, 24, 0);`,
  `die "cotal: the sandbox could not take its Landlock scope: $!\\n" if $fd < 0;`,
  `syscall(446, $fd, 0) == 0 or die "cotal: the sandbox could not take its Landlock scope: $!\\n";`,
  `exec { $ARGV[0] } @ARGV or die "cotal: cannot run $ARGV[0]: $!\\n";`,
].join(" ");

/** The argv prefix that takes the scope and then runs what follows it. */
export function scopeChain(): string[] {
  return [SCOPE_INTERPRETER, "-e", SCRIPT, "--"];
}

let abi: number | undefined;

/** This kernel's Landlock ABI, 0 when Landlock is absent or disabled (asked once). */
export function landlockAbi(): number {
  if (abi === undefined) {
    try {
      abi = landlockAbiVersion();
    } catch {
      abi = 0; // no libc through FFI here: a process that spawns no sandbox
    }
  }
  return abi;
}

/**
 * Why an agent's sandbox cannot take the scope here (one clause), or undefined when it can:
 * a kernel before 6.12 or with Landlock off, or no Perl.
 */
export function scopeUnavailable(): string | undefined {
  return scopeUnavailableWith(landlockAbi(), () => {
    try {
      Deno.statSync(SCOPE_INTERPRETER);
      return true;
    } catch {
      return false;
    }
  });
}

/** {@linkcode scopeUnavailable} for a given ABI and interpreter check (a test's kernel has one). */
export function scopeUnavailableWith(
  v: number,
  interpreterExists: () => boolean,
): string | undefined {
  if (v < LANDLOCK_SCOPE_ABI) {
    return v === 0
      ? "this kernel has no Landlock (it needs Linux 6.12 with landlock in its lsm= list)"
      : `this kernel's Landlock is ABI ${v}; scopes need ABI ${LANDLOCK_SCOPE_ABI} (Linux 6.12)`;
  }
  if (!interpreterExists()) return `${SCOPE_INTERPRETER} is missing (install perl-base)`;
  return undefined;
}
