/**
 * cotal: the operator CLI. A thin composition root: importing a command module registers it;
 * `dispatch` resolves the command through the shared registry.
 * @module
 */
import { dispatch } from "../lib/cli/mod.ts";
import { registry } from "../lib/registry.ts";
import "../lib/mesh/commands/up.ts";
import "../lib/mesh/commands/space.ts";
import "../lib/mesh/commands/signer.ts";
import "../lib/mesh/commands/ops.ts";
import "../lib/mesh/commands/systemd.ts";
import "../lib/mesh/commands/doctor.ts";
import "../lib/mesh/commands/agents.ts";
import "../lib/mesh/commands/delivery.ts";
import "../lib/mcp/command.ts";

import config from "../deno.json" with { type: "json" };

Deno.exit(await dispatch(Deno.args, registry, { program: "cotal", version: config.version }));
