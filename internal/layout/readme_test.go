package layout

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxReadmeLines keeps the root README a guide (issue 28): what a user
// needs to start, the rest in docs/ and the package guide.
const maxReadmeLines = 300

func TestReadmeIsAGuide(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	assert.LessOrEqual(t, bytes.Count(readme, []byte("\n")), maxReadmeLines, "README.md lines")
}
