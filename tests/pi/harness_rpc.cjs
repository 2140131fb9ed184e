const child = require("node:child_process").spawn(process.env.HARNESS_PY, ["-m", "harness.cli", "rpc", ...process.argv.slice(4)], { stdio: "inherit" });
process.on("SIGTERM", () => child.kill("SIGTERM")); child.on("exit", (code) => process.exit(code ?? 1));
