package git_test

import (
	"fmt"

	"github.com/shard-dev/shard/workspaces/git"
)

// A workspace without a branch of its own gets a generated one: the label's
// slug and a short unique suffix under "shard/".
func ExampleBranchName() {
	fmt.Println(git.BranchName("Fix the login bug!", "7f3a9c"))
	fmt.Println(git.BranchName("", "7f3a9c"))
	// Output:
	// shard/fix-the-login-bug-7f3a9c
	// shard/7f3a9c
}
