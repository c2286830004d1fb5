package cudaops

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/device"
)

// The row kernels run one warp per row, eight rows to a block.
const rowsPerBlock = blockSize / 32

func rowGrid(rows int) int { return max(1, min((rows+rowsPerBlock-1)/rowsPerBlock, maxGrid)) }

// LogSoftmax computes dst = src - logsumexp(src) per row.
func (d *Device) LogSoftmax(dst, src device.Buffer, rows, cols int) {
	d.rowKernel("LogSoftmax", d.ks.logSoftmax, rows, cols, dst, src)
}

// LogSoftmaxGrad computes dst = dy - exp(y)*sum(dy) per row.
func (d *Device) LogSoftmaxGrad(dst, dy, y device.Buffer, rows, cols int) {
	d.rowKernel("LogSoftmaxGrad", d.ks.logSoftmaxGrad, rows, cols, dst, dy, y)
}

// rowKernel launches k, a warp per row, on operands that are each rows x
// cols, dst first: the kernels' arguments are each operand's pointer and
// dtype, then rows and cols. The softmax kernels and their gradients.
func (d *Device) rowKernel(op string, k *kernel, rows, cols int, operands ...device.Buffer) {
	d.enter()
	defer d.leave()
	bs := make([]*Buffer, len(operands))
	args := make([]param, 0, 2*len(operands)+2)
	for i, o := range operands {
		bs[i] = d.buf(o, op)
		args = append(args, ptr(bs[i]), dt(bs[i]))
	}
	checkRows(op, rows, cols)
	checkLen(op, rows*cols, bs...)
	if rows*cols == 0 {
		return
	}
	d.launch(k, rowGrid(rows), append(args, pInt(rows), pInt(cols))...)
}

func checkRows(op string, rows, cols int) {
	if rows < 0 || cols < 0 || (cols > 0 && rows > maxElems/cols) {
		panic(fmt.Sprintf("cudaops: %s: %d rows of %d", op, rows, cols))
	}
}

// noBadRow is the flag's value when every label was a class index: the
// kernels record the lowest bad row with atomicMin.
const noBadRow = math.MaxInt32

// CrossEntropy computes loss[r] = logsumexp(logits[r]) - logits[r, labels[r]].
// It waits for the kernel, to panic on a label that is not a class index
// as the CPU backend does.
func (d *Device) CrossEntropy(loss, logits, labels device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	lb, xb, yb := d.buf(loss, "CrossEntropy"), d.buf(logits, "CrossEntropy"), d.buf(labels, "CrossEntropy")
	checkRows("CrossEntropy", rows, cols)
	checkLen("CrossEntropy", rows*cols, xb)
	checkLen("CrossEntropy", rows, lb, yb)
	if rows == 0 {
		return
	}
	d.setFlag("CrossEntropy", noBadRow)
	d.launch(d.ks.crossEntropy, rowGrid(rows), ptr(lb), dt(lb), ptr(xb), dt(xb), ptr(yb), dt(yb),
		pInt(rows), pInt(cols), pPtr(d.flag))
	d.checkLabels("CrossEntropy", yb, cols)
}

// CrossEntropyGrad computes dlogits = dloss * (softmax(logits) - onehot(labels)).
func (d *Device) CrossEntropyGrad(dlogits, logits, labels, dloss device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	db, xb := d.buf(dlogits, "CrossEntropyGrad"), d.buf(logits, "CrossEntropyGrad")
	yb, gb := d.buf(labels, "CrossEntropyGrad"), d.buf(dloss, "CrossEntropyGrad")
	checkRows("CrossEntropyGrad", rows, cols)
	checkLen("CrossEntropyGrad", rows*cols, db, xb)
	checkLen("CrossEntropyGrad", rows, yb, gb)
	if rows == 0 {
		return
	}
	d.setFlag("CrossEntropyGrad", noBadRow)
	d.launch(d.ks.crossEntropyGrad, rowGrid(rows), ptr(db), dt(db), ptr(xb), dt(xb), ptr(yb), dt(yb),
		ptr(gb), dt(gb), pInt(rows), pInt(cols), pPtr(d.flag))
	d.checkLabels("CrossEntropyGrad", yb, cols)
}

// checkLabels reads the bad-row flag and panics, naming the label, when a
// kernel found one.
func (d *Device) checkLabels(op string, labels *Buffer, cols int) {
	r := d.readFlag(op)
	if r == noBadRow {
		return
	}
	v := d.element(labels, int(r))
	panic(fmt.Sprintf("cudaops: %s: label %v (row %d) is not a class index in [0, %d)", op, v, r, cols))
}

// Argmax writes the index of each row's first largest element.
func (d *Device) Argmax(dst, src device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	db, sb := d.buf(dst, "Argmax"), d.buf(src, "Argmax")
	checkRows("Argmax", rows, cols)
	checkLen("Argmax", rows*cols, sb)
	checkLen("Argmax", rows, db)
	if rows == 0 {
		return
	}
	if cols == 0 {
		d.fill(db, 0, rows, 0) // the CPU's answer for an empty row
		return
	}
	d.launch(d.ks.argmax, rowGrid(rows), ptr(db), dt(db), ptr(sb), dt(sb), pInt(rows), pInt(cols))
}
