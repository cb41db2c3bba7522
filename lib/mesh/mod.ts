/**
 * The operator's wing: Cotal run as a stack on one machine, over the library. It owns what an
 * operator does and the library does not: a root's layout (`layout.ts`; the machine registry
 * of running meshes is `lib/workspace/machine_registry.ts`, which `cotal mcp` reads too), bringing a stack up and down (`up.ts`, `stack.ts`, `daemons.ts`:
 * the broker, then per space its signer, delivery daemon and supervisor, each under its
 * permission row), spaces added, removed, backed up and restored (`space*.ts`, `backup.ts`,
 * `snapshot.ts`), the watchdog that heals a detached stack (`watchdog.ts`), systemd units
 * (`systemd.ts`), and every `cotal` verb (`commands/`, registered by `commands/mod.ts`).
 *
 * Nothing in `lib/` imports it; `cmd/` does. This barrel is what the daemons' entry points use;
 * the CLI loads the verbs through `commands/mod.ts` (importing a verb registers it).
 *
 * @module
 */
export { Watchdog } from "./watchdog.ts";
