// Reads (and optionally appends to) a session file with pi's own SessionManager.
//
// Usage: node pi_reader.mjs <pi-package-dir> < request.json
//   <pi-package-dir>: the installed @mariozechner/pi-coding-agent folder (holds package.json).
//   request: {"path": "...", "ops": [...], "selfcheck": false}
//
// ops run in order on SessionManager.open(path), the way pi's CLI continues a session:
//   {"op": "message", "message": {...}}          appendMessage (timestamp defaults to now)
//   {"op": "model_change", "provider", "modelId"} appendModelChange
//   {"op": "thinking_level_change", "level"}      appendThinkingLevelChange
//   {"op": "label", "targetId", "label"}          appendLabelChange (null: undefined, clears)
//   {"op": "name", "name"}                        appendSessionInfo
//   {"op": "branch", "id"}                        branch (moves the leaf in memory only)
//   {"op": "branch_with_summary", "id", "summary"} branchWithSummary
//
// Prints one JSON object: "appended" (ids the ops returned) and "state", what a fresh
// SessionManager.open(path) sees afterwards (so nothing is reported from memory alone): leaf
// id, the leaf-to-root branch (ids and types), the header, name, labels, and
// buildSessionContext()'s messages / thinkingLevel / model, plus convertToLlm(messages).
//
// SessionManager and convertToLlm are imported from their modules under dist/core/ (the same
// classes the package's index re-exports: "selfcheck" proves it) because importing the index
// loads the whole CLI and costs ~1.7 s a call instead of ~0.2 s.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const pkgDir = process.argv[2];
const request = JSON.parse(readFileSync(0, "utf8"));
const load = (rel) => import(pathToFileURL(join(pkgDir, rel)).href);
const { SessionManager } = await load("dist/core/session-manager.js");
const { convertToLlm } = await load("dist/core/messages.js");

if (request.selfcheck) {
	const index = await load("dist/index.js");
	const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
	console.log(
		JSON.stringify({
			version: pkg.version,
			sameSessionManager: index.SessionManager === SessionManager,
			sameConvertToLlm: index.convertToLlm === convertToLlm,
		}),
	);
	process.exit(0);
}

const appended = [];
if (request.ops && request.ops.length > 0) {
	const sm = SessionManager.open(request.path);
	for (const op of request.ops) {
		switch (op.op) {
			case "message":
				appended.push(sm.appendMessage({ timestamp: Date.now(), ...op.message }));
				break;
			case "model_change":
				appended.push(sm.appendModelChange(op.provider, op.modelId));
				break;
			case "thinking_level_change":
				appended.push(sm.appendThinkingLevelChange(op.level));
				break;
			case "label":
				appended.push(sm.appendLabelChange(op.targetId, op.label ?? undefined)); // null clears
				break;
			case "name":
				appended.push(sm.appendSessionInfo(op.name));
				break;
			case "branch":
				sm.branch(op.id);
				break;
			case "branch_with_summary":
				appended.push(sm.branchWithSummary(op.id, op.summary));
				break;
			default:
				throw new Error(`unknown op ${op.op}`);
		}
	}
}

const sm = SessionManager.open(request.path);
const context = sm.buildSessionContext();
const labels = {};
for (const entry of sm.getEntries()) {
	const label = sm.getLabel(entry.id);
	if (label !== undefined) labels[entry.id] = label;
}
console.log(
	JSON.stringify({
		appended,
		state: {
			leafId: sm.getLeafId(),
			branch: sm.getBranch().map((e) => ({ id: e.id, type: e.type, parentId: e.parentId })),
			header: sm.getHeader(),
			name: sm.getSessionName() ?? null,
			labels,
			entryCount: sm.getEntries().length,
			messages: context.messages,
			thinkingLevel: context.thinkingLevel,
			model: context.model,
			llm: convertToLlm(context.messages),
		},
	}),
);
