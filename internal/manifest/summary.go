package manifest

import (
	"bytes"
	"fmt"
)

// The markers around the summary table of docs/accuracy.md (replay
// accuracy writes them), which other documents quote verbatim.
const (
	SummaryBegin = "<!-- summary:begin -->"
	SummaryEnd   = "<!-- summary:end -->"
)

// Summary returns the text between the summary markers of a report
// (docs/accuracy.md), without the markers and the newlines next to them:
// the summary table as the report has it, for a document that quotes it
// to compare with.
func Summary(report []byte) (string, error) {
	_, after, ok := bytes.Cut(report, []byte(SummaryBegin))
	if !ok {
		return "", fmt.Errorf("no %s marker", SummaryBegin)
	}
	body, _, ok := bytes.Cut(after, []byte(SummaryEnd))
	if !ok {
		return "", fmt.Errorf("no %s marker after %s", SummaryEnd, SummaryBegin)
	}
	if bytes.Contains(body, []byte(SummaryBegin)) {
		return "", fmt.Errorf("%s twice before %s", SummaryBegin, SummaryEnd)
	}
	return string(bytes.Trim(body, "\n")), nil
}
