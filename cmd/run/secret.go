package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// The job secret of ranks started by Slurm, Open MPI or torchrun (the
// local launcher passes the whole unique id in envUID instead): NCCL has
// the application pass ncclGetUniqueId's bytes from rank 0 to the others;
// here it comes from the environment or from a file only the user can
// read, never from a fixed value.
const (
	// envSecret holds the secret as 64 hex digits.
	envSecret = "TWINCCL_SECRET"
	// envSecretFile names a file with the secret in hex, mode 0600, owned
	// by the user; rank 0 creates it when it does not exist, the other
	// ranks wait for it.
	envSecretFile = "TWINCCL_SECRET_FILE"
)

// errNoSecret says how to give a job its secret.
var errNoSecret = fmt.Errorf("no job secret: set %s to a path every rank can read (rank 0 creates it, mode 0600, when it does not exist) or %s to 64 hex digits (e.g. $(openssl rand -hex 32)) in every rank's environment", envSecretFile, envSecret)

// jobSecret completes id, which has the root's address, with the job's
// secret and the magic derived from it, for a rank of an external
// launcher. timeout bounds the wait for rank 0's file.
func jobSecret(id bootstrap.UniqueID, rank int, timeout time.Duration) (bootstrap.UniqueID, error) {
	var err error
	switch hexs, path := os.Getenv(envSecret), os.Getenv(envSecretFile); {
	case hexs != "":
		if id.Secret, err = auth.ParseSecret(strings.TrimSpace(hexs)); err != nil {
			return id, fmt.Errorf("%s: %w", envSecret, err)
		}
	case path != "":
		if id.Secret, err = secretFile(path, rank == 0, timeout); err != nil {
			return id, fmt.Errorf("%s=%s: %w", envSecretFile, path, err)
		}
	default:
		return id, errNoSecret
	}
	id.Magic = magicOf(id.Secret)
	return id, nil
}

// magicOf is the public magic of a job whose ranks share only a secret:
// derived from it, one way.
func magicOf(s auth.Secret) uint64 {
	m := hmac.New(sha256.New, s[:])
	m.Write([]byte("twinccl magic"))
	return binary.LittleEndian.Uint64(m.Sum(nil))
}

// secretFile reads the secret file, which must be a regular file of this
// user that nobody else can read or write. With create (rank 0) a
// missing file is made with a fresh secret, atomically (written to a
// temporary file, then linked into place, so a reader never sees it
// half-written and two creators cannot both win); without it the file is
// waited for until timeout.
func secretFile(path string, create bool, timeout time.Duration) (auth.Secret, error) {
	if create {
		if err := createSecretFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return auth.Secret{}, err
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		s, err := readSecretFile(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return s, err
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("rank 0 did not create it within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func createSecretFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".twinccl-secret-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600.
	_, werr := tmp.WriteString(auth.NewSecret().Hex() + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
}

func readSecretFile(path string) (auth.Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return auth.Secret{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return auth.Secret{}, err
	}
	if !st.Mode().IsRegular() {
		return auth.Secret{}, errors.New("not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return auth.Secret{}, fmt.Errorf("mode %04o lets other users read or write it (want 0600)", st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != uint32(os.Getuid()) {
		return auth.Secret{}, fmt.Errorf("owned by uid %d, not by this user (uid %d)", sys.Uid, os.Getuid())
	}
	b := make([]byte, 2*auth.SecretSize+2)
	n, err := f.Read(b)
	if err != nil {
		return auth.Secret{}, err
	}
	return auth.ParseSecret(strings.TrimSpace(string(b[:n])))
}
