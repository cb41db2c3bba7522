/**
 * `spawn`, `despawn` and `spawned`: the tools of an agent whose persona lets it start agents of
 * its own. They exist only when its launch material names a spawn channel, and go through that
 * channel to the supervisor (lib/manager/sandbox/spawn_channel.ts), which decides: the agent
 * picks one of the personas the operator listed for it, nothing more.
 *
 * @module
 */
import { askSpawnChannel, type SpawnChannelRequest } from "../manager/mod.ts";
import { type MeshTool, schema } from "./tools.ts";

/** How long a `spawn` call waits for the supervisor (its readiness window is 30 s by default). */
export const SPAWN_TOOL_TIMEOUT_MS = 120_000;

/** Asks the supervisor; the default goes over the socket. */
export type SpawnAsk = (
  req: SpawnChannelRequest,
  timeoutMs: number,
) => Promise<Record<string, unknown>>;

/** The spawn tools over the channel at `place.socket`, offering `place.personas`. */
export function spawnTools(
  place: { readonly socket: string; readonly personas: readonly string[] },
  ask: SpawnAsk = (req, ms) => askSpawnChannel(place.socket, req, ms),
): MeshTool[] {
  return [
    {
      name: "spawn",
      description: `Start a new agent from a persona you may spawn (${
        place.personas.join(", ")
      }). Returns its name and id once it is online; give it work with dm or task, stop it with despawn.`,
      inputSchema: schema({
        persona: {
          type: "string",
          description: "the persona to start",
          enum: [...place.personas],
        },
      }, ["persona"]),
      run: (a) => ask({ op: "spawn", persona: String(a.persona) }, SPAWN_TOOL_TIMEOUT_MS),
    },
    {
      name: "despawn",
      description: "Stop an agent you spawned, by its name (see spawned).",
      inputSchema: schema({
        name: { type: "string", description: "the agent's name", maxLength: 64 },
      }, ["name"]),
      run: (a) => ask({ op: "despawn", name: String(a.name) }, 60_000),
    },
    {
      name: "spawned",
      description: "The agents you spawned that are still running: name, id, role, status.",
      inputSchema: schema({}, []),
      run: () => ask({ op: "list" }, 30_000),
    },
  ];
}
