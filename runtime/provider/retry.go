package provider

import (
	"context"
	"net/http"
	"strconv"
)

// retryNoticeKey keys the retry notice in a Stream's context.
type retryNoticeKey struct{}

// WithRetryNotice returns ctx carrying notice, which a provider calls each
// time a failed request of a Stream made with ctx is about to be retried
// (a 408, 409, 429 or 5xx answer, or a connection failure, before any byte
// of the stream). The runtime turns it into its `retrying` activity
// (docs/protocol.md §10.2). notice runs on the SDK's goroutine and must not
// block.
func WithRetryNotice(ctx context.Context, notice func()) context.Context {
	return context.WithValue(ctx, retryNoticeKey{}, notice)
}

// noticeRetry is the SDK middleware behind WithRetryNotice: it runs around
// every attempt (the SDKs number them in X-Stainless-Retry-Count) and calls
// the notice when the attempt failed in a way the SDK retries and attempts
// are left. It mirrors the SDKs' own rule (x-should-retry first, then the
// status), so a notice that announces no retry is at worst one an SDK's
// retry-delay cap declines.
func noticeRetry(maxRetries int, req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	notice, _ := req.Context().Value(retryNoticeKey{}).(func())
	if notice == nil || req.Context().Err() != nil {
		return res, err
	}
	attempt, _ := strconv.Atoi(req.Header.Get("X-Stainless-Retry-Count"))
	if attempt < maxRetries && retryable(res, err) {
		notice()
	}
	return res, err
}

// retryable reports whether the SDKs retry an attempt that ended with res
// and err.
func retryable(res *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch res.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	s := res.StatusCode
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}
