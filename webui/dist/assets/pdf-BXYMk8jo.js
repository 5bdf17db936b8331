import{t as e}from"./index-CWHdZ11w.js";var t=`/assets/pdf.worker.min-C8PGFc0r.mjs`,n=null;function r(){return n??=(async()=>{let n=await e(()=>import(`./pdf-CJaPw11k.js`),[]);return typeof Worker<`u`&&(n.GlobalWorkerOptions.workerSrc=t),n})(),n.catch(()=>n=null),n}async function i(e){let t=await r(),n=e instanceof Uint8Array?e:new Uint8Array(e),i=await t.getDocument({data:n,isEvalSupported:!1,disableFontFace:!0,verbosity:0}).promise;try{let e=[];for(let t=1;t<=i.numPages;t++){let n=await i.getPage(t),r=await n.getTextContent(),a=``;for(let e of r.items){if(!(`str`in e))continue;let t=e;a+=t.str+(t.hasEOL?`
`:``)}e.push(a.replace(/[ \t]+\n/g,`
`).trim()),n.cleanup()}return e.filter(e=>e!==``).join(`

`)}finally{await i.destroy()}}export{i as pdfText};