package nvmlsource

import (
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// libraryDirs are where drivers put libnvidia-ml.so.1 when the dynamic loader is not told.
var libraryDirs = []string{
	"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
	"/usr/lib/aarch64-linux-gnu", "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
}

// Library returns the real NVML. path names libnvidia-ml.so.1 explicitly; empty lets the dynamic
// loader search, then the usual driver directories.
func Library(path string) nvml.Interface {
	if path == "" {
		path = findLibrary()
	}
	if path == "" {
		return nvml.New()
	}
	return nvml.New(nvml.WithLibraryPath(path))
}

func findLibrary() string {
	for _, d := range libraryDirs {
		p := filepath.Join(d, "libnvidia-ml.so.1")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
