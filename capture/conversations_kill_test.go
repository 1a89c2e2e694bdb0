//go:build unix

package capture

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestConversationsSurviveKill: a conversation committed by the writer
// (no fsync) survives a kill -9 of the process that wrote it.
func TestConversationsSurviveKill(t *testing.T) {
	if dir := os.Getenv("HONE_CONV_KILL_DIR"); dir != "" {
		s, err := Open(dir, testOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Conversations(0, 0)
		for i := range 100 {
			if err := c.PutConversation("o", fmt.Sprintf("resp_%d", i), convJSON(i)); err != nil {
				t.Fatal(err)
			}
		}
		c.written(t)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConversationsSurviveKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HONE_CONV_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := openTest(t, dir, testOptions())
	defer s.Close()
	c := s.Conversations(0, 0)
	for i := range 100 {
		wantConv(t, c, "o", fmt.Sprintf("resp_%d", i), convJSON(i))
	}
}
